# Shared by the tests that act as members of parled's group (sourced after
# lib.sh): real users and groups made for the test, removed at its end.
#
# make_users TAG: skips the test (exit 77) unless run as root with useradd
# and setpriv; then makes group $grp and admin group $adm, members $alice and
# $bob, $carol a member of both, and $eve in neither (names from TAG, two
# letters, and the shell's pid, so that tests running at once never meet).
# The caller's EXIT trap calls remove_users. as USER CMD... runs CMD with
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
}

# Empty until make_users sets them, so that an EXIT trap may call
# remove_users whenever the test ends.
grp= adm= alice= bob= carol= eve=

remove_users() {
    for u in $alice $bob $carol $eve; do userdel "$u" 2>/dev/null; done
    groupdel "$grp" 2>/dev/null
    groupdel "$adm" 2>/dev/null
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
