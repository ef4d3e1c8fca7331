#!/bin/sh
# docs/algorithms.md "How to add a rule", steps 1 and 2, done as written in a
# copy of the source tree: a toy rule `toy` in its own file, its table line
# and extern in coupling.c, the file in daemon/coupling/meson.build. The copy
# must configure and build parle-train, which must list `toy` among the known
# rules and train a 2-replica job with it to the end. Each edit finds its
# anchor or the test fails, so a guide that no longer matches the code fails
# here. The build is the smallest that links parle-train (no CUDA, MPI,
# oneDNN; no optimisation).
. "$(dirname "$0")/lib.sh"
SRC=$PARLE_SOURCE_ROOT
COPY=$TMP/src
mkdir -p "$COPY"

# The tree as the next commit would hold it (tracked and new files, not
# ignored ones) in a git checkout; else everything but build folders.
if [ "$(git -C "$SRC" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$SRC" && pwd -P)" ]; then
    git -C "$SRC" ls-files -z --cached --others --exclude-standard >"$TMP/files" ||
        fail "git ls-files in $SRC"
    python3 - "$SRC" "$COPY" "$TMP/files" <<'PY' || fail "copying the tracked tree of $SRC"
import os, shutil, sys
src, dst, listing = sys.argv[1], sys.argv[2], sys.argv[3]
for rel in open(listing, "rb").read().decode().split("\0"):
    if rel and os.path.isfile(os.path.join(src, rel)):  # not a deleted file
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel))
PY
else
    for f in "$SRC"/* "$SRC"/.[!.]*; do
        case ${f##*/} in build*|.git|'.[!.]*') continue ;; esac
        cp -a "$f" "$COPY/" || fail "copying $f"
    done
fi
[ -f "$COPY/daemon/coupling/coupling.c" ] || fail "the copy of $SRC has no daemon/coupling/coupling.c"

# edit FILE PYTHON_REGEX REPLACEMENT: one match of the (multi-line) regex
# replaced, or the test fails naming the file and the anchor.
edit() {
    python3 - "$COPY/$1" "$2" "$3" <<'PY' || fail "$1: the guide's anchor /$2/ is not there once"
import re, sys
path, pattern, repl = sys.argv[1:4]
text = open(path).read()
new, n = re.subn(pattern, repl, text, flags=re.M | re.S)
if n != 1:
    sys.exit(f"{path}: {n} matches of /{pattern}/")
open(path, "w").write(new)
PY
}

# Step 1: one new file ending in its table entry. Local SGD with model
# averaging: each replica steps on its own momentum, and every 4 steps the
# replicas' weights are replaced by their mean.
[ ! -e "$COPY/daemon/coupling/toy.c" ] || fail "daemon/coupling/toy.c exists already"
cat >"$COPY/daemon/coupling/toy.c" <<'C'
#include "coupling.h"
#include "graph.h"
#include "rule_state.h"

typedef struct toy_state {
    float *u; /* momentum, each replica's own */
} toy_state;

static int toy_init(replica *r, char *err, size_t errlen)
{
    toy_state *s = rule_state_new(r, sizeof *s, "toy", err, errlen);
    return s ? rule_state_vectors(r, "toy", RULE_VECTORS(&s->u), err, errlen) : -1;
}

static int toy_steps_per_sync(const job_config *cfg) { return 4; }
static void toy_begin(replica *r) {}

static void toy_step(replica *r)
{
    rule_local_step(r, r->model.params, ((toy_state *)r->rule_state)->u, 1);
}

static int toy_sync(replica *r)
{
    double t0 = comm_now_s();
    const float *mean = comm_allreduce_mean(r->comm, r->rank, &r->ctx, r->model.params,
                                            r->model.nparams);
    r->sync_s += comm_now_s() - t0;
    if (!mean)
        return -1;
    backend_copy(&r->ctx, r->model.params, mean, r->model.nparams * sizeof(float));
    return 0;
}

static float *toy_weights(replica *r) { return r->model.params; }

static int toy_state_buffers(replica *r, const char **names, float **bufs)
{
    names[0] = "x", bufs[0] = r->model.params;
    names[1] = "u", bufs[1] = ((toy_state *)r->rule_state)->u;
    return 2;
}

static int toy_vectors(const job_config *cfg, int id) { return 1; }

static int toy_reseed(replica *r, int bad)
{
    return rule_reseed_mean(r, bad, r->model.params, ((toy_state *)r->rule_state)->u);
}

static void toy_free(replica *r)
{
    toy_state *s = r->rule_state;
    if (s)
        rule_state_free(r, NULL, RULE_VECTORS(&s->u));
}

const coupling_rule coupling_toy = {
    .name = "toy",
    .net = NET_ANY,
    .init = toy_init,
    .steps_per_sync = toy_steps_per_sync,
    .begin = toy_begin,
    .step = toy_step,
    .sync = toy_sync,
    .weights = toy_weights,
    .state = toy_state_buffers,
    .vectors = toy_vectors,
    .reseed = toy_reseed,
    .free = toy_free,
};
C

# Step 2: the extern above the table, the table line last in rules[], the
# file in the coupling library's sources.
edit daemon/coupling/coupling.c '(^extern const coupling_rule [^;]*;\n)(?!.*^extern const coupling_rule )' \
    '\1extern const coupling_rule coupling_toy;\n'
edit daemon/coupling/coupling.c '(^static const coupling_rule \*const rules\[\] = \{\n.*?)(^\};)' \
    '\1    &coupling_toy,\n\2'
edit daemon/coupling/meson.build "(static_library\('parle_coupling',\s*files\()" "\1'toy.c', "

${MESON:-meson} setup "$COPY/build" "$COPY" -Dwerror=true -Dbuildtype=plain -Dcuda=disabled -Dmpi=disabled \
    -Ddnnl=disabled -Dfuzz=false -Dlearning_tests=false >"$TMP/setup.log" 2>&1 ||
    { tail -n 30 "$TMP/setup.log" >&2; fail "the copy with the toy rule does not configure"; }
${NINJA:-ninja} -C "$COPY/build" -j "$(nproc)" daemon/parle-train >"$TMP/build.log" 2>&1 ||
    { grep -E "error:|undefined reference" "$TMP/build.log" | head -n 20 >&2
      fail "the copy with the toy rule does not build parle-train"; }
TRAIN=$COPY/build/daemon/parle-train

# The validator reads the table: an unknown rule's message lists toy last.
cat >"$TMP/unknown.json" <<'JOB'
{"model": {"arch": "mlp"}, "data": {"dataset": "synthetic"}, "algorithm": {"name": "no-such"}}
JOB
"$TRAIN" "$TMP/unknown.json" >"$TMP/unknown.out" 2>&1 && fail "parle-train ran algorithm no-such"
grep -q 'algorithm.name: unknown "no-such"; known: .*, toy$' "$TMP/unknown.out" ||
    fail "the unknown-rule message does not end with toy: $(cat "$TMP/unknown.out")"

# Two replicas, 8 steps an epoch each (2 averagings), 2 epochs: it must run to
# the end, evaluate the master after each epoch and learn the synthetic set
# (under 50% test error; 90% is chance).
cat >"$TMP/toy.json" <<'JOB'
{"model": {"arch": "mlp"}, "data": {"dataset": "synthetic", "train_limit": 256, "test_limit": 128},
 "algorithm": {"name": "toy", "replicas": 2}, "optim": {"lr": 0.05, "batch": 32},
 "epochs": 2, "seed": 5, "devices": "cpu:2", "log_every": 4}
JOB
"$TRAIN" "$TMP/toy.json" >"$TMP/toy.out" 2>"$TMP/toy.err" ||
    fail "parle-train with algorithm toy: $(tail -n 5 "$TMP/toy.err")"
for e in 1 2; do
    grep -Eq "^epoch $e/2 done: test error [0-9.]+% test loss [0-9.]+ " "$TMP/toy.err" ||
        fail "no evaluation after epoch $e: $(cat "$TMP/toy.err")"
done
final=$(sed -n 's/^final test error: \([0-9.]*\)%$/\1/p' "$TMP/toy.out")
[ -n "$final" ] || fail "no final test error: $(cat "$TMP/toy.out")"
python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 50)" "$final" ||
    fail "the toy rule did not learn: final test error $final%"
echo "guide_rule: toy built and trained: $(cat "$TMP/toy.out")"
