# Shared by the sweep tests (sourced after lib.sh): a tiny base job and
# waiting for a sweep.

# sweep_base FILE EPOCHS [TRAIN_LIMIT]: an MLP on synthetic data whose test
# error depends on optim.lr (8 steps an epoch at the default 256 examples).
sweep_base() {
    cat >"$1" <<JOB
{"name": "it-sweep", "model": {"arch": "mlp"},
 "data": {"dataset": "synthetic", "train_limit": ${3:-256}, "test_limit": 256},
 "algorithm": {"name": "sgd"}, "optim": {"lr": 0.01, "batch": 32},
 "epochs": $2, "seed": 3, "devices": "cpu", "log_every": 4}
JOB
}

# sweep_field ID KEY: a top-level value of the sweep's status.
sweep_field() {
    ctl sweep status "$1" --json >"$TMP/sweep_st.json" 2>/dev/null || true
    field "$TMP/sweep_st.json" "$2"
}

# wait_sweep ID STATE SECONDS
wait_sweep() {
    for _ in $(seq $(($3 * 10))); do
        [ "$(sweep_field "$1" state)" = "$2" ] && return 0
        sleep 0.1
    done
    fail "sweep $1 did not reach state $2 within $3 s (now: $(sweep_field "$1" state))"
}
