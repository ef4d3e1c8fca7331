# Shared by the tests that act as members of parled's group (sourced after
# lib.sh): real users and groups made for the test, removed at its end.
#
# make_users TAG: skips the test (exit 77) unless run as root with useradd
# and setpriv; then makes group $grp and admin group $adm, members $alice and
# $bob, $carol a member of both, and $eve in neither (names from TAG, two
# letters, and the shell's pid, so that tests running at once never meet).
# The caller's EXIT trap calls remove_users (which also removes users_bin's
# copies). as USER CMD... runs CMD with
# USER's uid, gid and groups; ctl_as USER ARGS... runs parlectl so.
make_users() {
    if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v setpriv >/dev/null; then
        echo "SKIP: needs root, useradd and setpriv"
        exit 77
    fi
    grp=p${1}g$$ adm=p${1}m$$
    alice=p${1}a$$ bob=p${1}b$$ carol=p${1}c$$ eve=p${1}e$$
    groupadd "$grp" && groupadd "$adm" || fail "groupadd"
    useradd -M -N -g "$grp" -s /usr/sbin/nologin "$alice" &&
        useradd -M -N -g "$grp" -s /usr/sbin/nologin "$bob" &&
        useradd -M -N -g "$grp" -G "$adm" -s /usr/sbin/nologin "$carol" &&
        useradd -M -N -s /usr/sbin/nologin "$eve" || fail "useradd"
    chmod 755 "$TMP"
    users_bin
}

# try_users TAG: make_users where the test may (as root, with useradd and
# setpriv): members=1 and GROUP=$grp; elsewhere members=0 and GROUP the
# caller's own group, for the parts of a test that need no other user. The
# caller's EXIT trap calls remove_users either way.
try_users() {
    members=0 GROUP=$(id -gn)
    if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
        make_users "$1"
        members=1 GROUP=$grp
    fi
}

# What the test runs as other users, copied where they may enter: the
# build directory may sit in a folder they cannot (a clone in root's 0700
# home). PARLECTL and RAWCLIENT name the copies from then on.
users_bin() {
    shared_bin=$(mktemp -d /tmp/parle-bin.XXXXXX) || fail "mktemp for the programs other users run"
    cp "$PARLECTL" "$shared_bin/parlectl" && cp "$RAWCLIENT" "$shared_bin/rawclient" ||
        fail "copying to $shared_bin"
    chmod 755 "$shared_bin" "$shared_bin/parlectl" "$shared_bin/rawclient"
    PARLECTL=$shared_bin/parlectl RAWCLIENT=$shared_bin/rawclient
}

# Empty until make_users sets them, so that an EXIT trap may call
# remove_users whenever the test ends.
grp= adm= alice= bob= carol= eve= shared_bin=

remove_users() {
    for u in $alice $bob $carol $eve; do userdel "$u" 2>/dev/null; done
    groupdel "$grp" 2>/dev/null
    groupdel "$adm" 2>/dev/null
    [ -z "$shared_bin" ] || rm -rf "$shared_bin"
}

as() {
    u=$1
    shift
    setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups -- "$@"
}

ctl_as() {
    u=$1
    shift
    as "$u" "$PARLECTL" --socket "$SOCK" "$@"
}
