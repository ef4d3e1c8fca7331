/* The accounting record (parlectl history; docs/architecture.md,
 * "Scheduling"): one JSON line per run of a job, appended to
 * <state dir>/accounting.jsonl and fsync'd as the run ends, so that what
 * each owner used outlives the job's removal (`rm`) and parled's restarts.
 * A run cut by a kill of parled is recorded at the next start, from what
 * usage.json last held ("interrupted").
 *
 * Bounded: once the file passes ACCT_FILE_MAX bytes it becomes
 * accounting.1.jsonl (replacing the one before) and a new file starts; the
 * history covers both. The runs of the file replaced are first summed per
 * owner and UTC day into accounting.days.jsonl (rewritten atomically), kept
 * ACCT_KEEP_DAYS days: however many runs another member makes, each
 * owner's use stays in the history that long, by the day. Every line is validated as it is read: a bad line
 * (a torn last one after a crash, or one edited by hand) is skipped and
 * counted, and a torn end is cut off before the next append.
 *
 * Reading, summing and the charge (acct_device_units) are pure functions of
 * their arguments (tests/unit/test_accounting.c); acct_open and acct_append
 * touch the files. */
#ifndef PARLE_ACCOUNTING_H
#define PARLE_ACCOUNTING_H

#include <stddef.h>
#include <cjson/cJSON.h>

#define ACCT_FILE_MAX (4u << 20)
#define ACCT_LINE_MAX 1024
#define ACCT_OWNERS_MAX 65536
#define ACCT_KEEP_DAYS 400
/* Device-seconds of one run: a century of 64 devices bounds any real one. */
#define ACCT_DEVICE_S_MAX 2e11

typedef struct acct_run {
    char id[32];
    unsigned uid;
    char user[64];
    /* How the run ended: done, failed, cancelled, timeout (the job ended); preempted,
     * held (back in the queue); stopped (parled's shutdown); interrupted
     * (parled was killed: recorded at its next start). */
    char end[16];
    char devices[64];            /* as status shows them: "cpu:2", "0,1" */
    double started_at, ended_at; /* unix seconds */
    double device_seconds;       /* acct_device_units x the seconds it ran */
} acct_run;

/* What a job holds, in devices, as fair share and the record charge it: a
 * GPU counts one, times the job's gpu_share; the daemon's CPU counts one,
 * so a job of `cores` of its `ncores` counts cores / ncores. */
double acct_device_units(int ngpus, double gpu_share, int cores, int ncores);

/* One run as a JSON object, and back: 0, or -1 with the bad field in why. */
cJSON *acct_run_json(const acct_run *r);
int acct_run_from_json(const cJSON *o, acct_run *r, char *why, size_t whylen);
/* One line of the file (without its '\n'): 0, or -1 with why. */
int acct_parse_line(const char *line, size_t len, acct_run *r, char *why, size_t whylen);

/* The runs as the history needs them: each one's owner, end and use. */
typedef struct acct_entry {
    unsigned uid;
    double ended_at, device_seconds;
} acct_entry;

/* An owner's runs that ended in one UTC day (day: its start, unix
 * seconds), once their lines have rotated out. */
typedef struct acct_day {
    unsigned uid;
    double day, device_seconds;
    long runs;
} acct_day;

typedef struct acct_name {
    unsigned uid;
    char user[64];
} acct_name;

typedef struct acct_log {
    char path[1040], old_path[1040], days_path[1040];
    acct_day *days; /* by day, then owner */
    size_t ndays, capdays;
    acct_entry *e;
    size_t n, cap;
    size_t old_n;   /* e[0..old_n) come from old_path, the rest from path */
    size_t bytes;   /* path's size */
    acct_name *names; /* each owner's latest name */
    int nnames, capnames;
    long skipped;   /* bad lines found in the files */
    char first_bad[320]; /* the first one: file, line and why */
} acct_log;

/* The lines of `text` (one file's content, `len` bytes) added to log, from
 * file `what` (for first_bad): 0, or -1 when out of memory. *whole: the
 * bytes up to the last '\n' (what is past it is a torn line). */
int acct_load_text(acct_log *log, const char *text, size_t len, const char *what,
                   size_t *whole);
/* One run added to the log in memory (acct_append also writes it). */
int acct_add(acct_log *log, const acct_run *r);
/* The runs e[0, upto) summed into log->days (and taken out of e), the days
 * older than ACCT_KEEP_DAYS before `now` dropped: 0, or -1 when out of
 * memory (nothing changed). */
int acct_fold(acct_log *log, size_t upto, double now);
/* One line of accounting.days.jsonl: {"uid", "user", "day", "runs",
 * "device_seconds"}: 0, or -1 with why. */
int acct_parse_day(const char *line, size_t len, acct_day *d, char *user, size_t userlen,
                   char *why, size_t whylen);

/* Read <state dir>/accounting.1.jsonl and accounting.jsonl: 0, or -1 with a
 * message (the log then holds what could be read, and appends go on). */
int acct_open(acct_log *log, const char *state_dir, char *err, size_t errlen);
/* Append one run (fsync'd; rotated past ACCT_FILE_MAX): 0, or -1 with a
 * message; the run is in the log in memory either way. */
int acct_append(acct_log *log, const acct_run *r, char *err, size_t errlen);
void acct_close(acct_log *log);

/* The history: per owner (all, or those whose name or uid in digits is
 * `user`; NULL: all) the runs that ended at or after `since` (unix
 * seconds; of the days kept, each day that ends after it, whole): {"since", "owners": [{"uid", "user", "runs", "device_hours"}],
 * "total_device_hours", "skipped_lines"}, owners by use, most first. */
cJSON *acct_history_json(const acct_log *log, const char *user, double since);

#endif
