# expect_exit_2 WANT COMMAND...: the bash form of cmake/expect_exit_2.cmake, sourced by the test
# scripts that check many refusals (check_faults.sh, check_resume.sh). COMMAND must exit with code 2
# within 60 s (a hang is killed and named), its stderr holding WANT; its stdout and stderr are left
# in out.txt and err.txt of $EXPECT_DIR (default: the current directory). A failure calls the
# script's fail MESSAGE.
expect_exit_2() {
  local want="$1" dir="${EXPECT_DIR:-.}" rc
  shift
  set +e
  timeout -s KILL 60 "$@" > "$dir/out.txt" 2> "$dir/err.txt"
  rc=$?
  set -e
  [ "$rc" -ne 137 ] || fail "hung (killed after 60 s): $*"
  [ "$rc" -eq 2 ] || fail "exit code $rc (want 2) for: $* ($(cat "$dir/err.txt"))"
  grep -qF -- "$want" "$dir/err.txt" || fail "for: $*: stderr lacks '$want': $(cat "$dir/err.txt")"
  echo "ok: $* -> $(head -c 400 "$dir/err.txt")"
}
