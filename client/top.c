/* parlectl top: the whole box at a glance (top.h), refreshed every -d
 * seconds on the terminal's alternate screen, with plain ANSI escapes and
 * termios, until `q`; one `top` request per refresh. Not on a terminal, or
 * with -n N, it prints N pictures and exits; --json prints the reply. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "top.h"

#define TOP_WIDTH 80          /* a snapshot's width, not on a terminal */
#define TOP_HEIGHT_MAX 10000  /* a snapshot's lines at most */

static volatile sig_atomic_t stop_asked, resized;
static struct termios saved;
static int screen_on;

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        resized = 1;
    else
        stop_asked = 1;
}

static void screen_end(void)
{
    if (!screen_on)
        return;
    screen_on = 0;
    fputs("\033[?25h\033[?1049l", stdout); /* the cursor back, the normal screen */
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
}

/* Keys one at a time, unechoed; the alternate screen, no cursor. */
static int screen_begin(void)
{
    if (tcgetattr(STDIN_FILENO, &saved) != 0)
        return fail("top: the terminal: %s", strerror(errno));
    struct termios raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
        return fail("top: the terminal: %s", strerror(errno));
    screen_on = 1;
    atexit(screen_end);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    fputs("\033[?1049h\033[?25l", stdout);
    return 0;
}

static void draw(const char *pic)
{
    fputs("\033[H", stdout);
    for (const char *p = pic; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fwrite(p, 1, n, stdout);
        fputs("\033[K", stdout);
        p += n;
        if (nl) {
            p++;
            if (*p)
                fputs("\r\n", stdout);
        }
    }
    fputs("\033[J", stdout);
    fflush(stdout);
}

/* The keys typed: 1 to quit, else 0 with the options changed. */
static int keys(top_options *opt)
{
    char k[32];
    ssize_t n = read(STDIN_FILENO, k, sizeof k);
    for (ssize_t i = 0; i < n; i++) {
        if (k[i] == 'q' || k[i] == 'Q')
            return 1;
        if (k[i] == 's')
            opt->sort = (enum top_sort)((opt->sort + 1) % TOP_SORTS);
        else if (k[i] == 'm')
            opt->mine_only = !opt->mine_only;
    }
    return 0;
}

static int parse_top(const command *cmd, int argc, char **argv, long *count, double *delay,
                     top_options *opt, int *json)
{
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        char *end;
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            printf("usage: parlectl %s\n", cmd->help);
            return 1;
        } else if (strcmp(s, "--json") == 0) {
            *json = 1;
        } else if (strcmp(s, "--mine") == 0) {
            opt->mine_only = 1;
        } else if (strcmp(s, "-n") == 0 || strcmp(s, "-d") == 0 || strcmp(s, "--sort") == 0) {
            if (i + 1 >= argc)
                return usage_error(cmd, s, " needs a value"), -1;
            const char *v = argv[++i];
            if (s[1] == 'n') {
                *count = strtol(v, &end, 10);
                if (!*v || *end || *count < 1 || *count > 1000000)
                    return usage_error(cmd, "-n: expected a count in 1..1000000, got ", v), -1;
            } else if (s[1] == 'd') {
                *delay = strtod(v, &end);
                if (!*v || *end || !(*delay >= 0.2 && *delay <= 60))
                    return usage_error(cmd, "-d: expected seconds in 0.2..60, got ", v), -1;
            } else {
                int k = 0;
                while (k < TOP_SORTS && strcmp(v, top_sort_name((enum top_sort)k)) != 0)
                    k++;
                if (k == TOP_SORTS)
                    return usage_error(cmd, "--sort: expected id, owner, progress or speed, got ",
                                       v), -1;
                opt->sort = (enum top_sort)k;
            }
        } else {
            return usage_error(cmd, "unexpected argument ", s), -1;
        }
    }
    return 0;
}

/* Pictures printed one after another (not a terminal, or -n). */
static int snapshots(const top_options *opt, long count, double delay)
{
    for (long i = 0; i < count; i++) {
        if (i > 0) {
            usleep((useconds_t)(delay * 1e6));
            putchar('\n');
        }
        cJSON *r = call(op_request("top", NULL));
        if (!r)
            return EXIT_FAIL;
        char *pic = top_render(r, opt, TOP_WIDTH, TOP_HEIGHT_MAX);
        cJSON_Delete(r);
        if (!pic)
            return fail("out of memory");
        fputs(pic, stdout);
        free(pic);
        fflush(stdout);
    }
    return EXIT_OK;
}

static void size_of_terminal(int *w, int *h)
{
    struct winsize ws;
    *w = TOP_WIDTH;
    *h = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *w = ws.ws_col > 1000 ? 1000 : ws.ws_col;
        *h = ws.ws_row;
    }
}

int cmd_top(const command *cmd, int argc, char **argv)
{
    long count = 0;
    double delay = 1.5;
    top_options opt = {0};
    int json = 0, parsed = parse_top(cmd, argc, argv, &count, &delay, &opt, &json);
    if (parsed != 0)
        return parsed > 0 ? EXIT_OK : EXIT_USAGE;
    if (json) {
        cJSON *r = call(op_request("top", NULL));
        if (!r)
            return EXIT_FAIL;
        print_json(r);
        cJSON_Delete(r);
        return EXIT_OK;
    }
    if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
        return snapshots(&opt, count > 0 ? count : 1, delay);
    cJSON *r = call(op_request("top", NULL)); /* a first error shows as any command's */
    if (!r)
        return EXIT_FAIL;
    if (screen_begin() != 0) {
        cJSON_Delete(r);
        return EXIT_FAIL;
    }
    opt.key_help = 1;
    int rc = EXIT_OK;
    for (long drawn = 0; !stop_asked;) {
        int w, h;
        size_of_terminal(&w, &h);
        char *pic = top_render(r, &opt, w, h);
        if (pic)
            draw(pic);
        free(pic);
        if (count > 0 && ++drawn >= count)
            break;
        /* Keys redraw at once from the same reply; the next request comes
         * once the delay has passed. */
        int left_ms = (int)(delay * 1000), quit = 0, redraw = 0;
        while (left_ms > 0 && !stop_asked && !quit && !redraw) {
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            int ms = left_ms < 100 ? left_ms : 100;
            int ready = poll(&p, 1, ms);
            left_ms -= ms;
            if (ready > 0) {
                top_options before = opt;
                quit = keys(&opt);
                redraw = before.sort != opt.sort || before.mine_only != opt.mine_only;
            }
            if (resized) {
                resized = 0;
                redraw = 1;
            }
        }
        if (quit)
            break;
        if (redraw)
            continue;
        cJSON *next = call(op_request("top", NULL));
        if (!next && stop_asked) /* Ctrl-C while it waited for parled */
            break;
        if (!next) {
            screen_end();
            fail("top: lost parled on %s", socket_path);
            rc = EXIT_GONE;
            break;
        }
        cJSON_Delete(r);
        r = next;
    }
    screen_end();
    cJSON_Delete(r);
    return rc;
}
