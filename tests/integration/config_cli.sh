#!/bin/sh
# resilient-config in a real process: the environment and nccl.conf files are
# resolved in NCCL's order and every problem is one clear warning on stderr.
# Usage: config_cli.sh <resilient-config binary>
set -u
tool=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$work/out"; echo "--- stderr"; cat "$work/err"; exit 1; }
run() { env -i PATH="$PATH" "$@" "$tool" >"$work/out" 2>"$work/err"; }

# 1. An unknown NCCL_RESILIENT_* name: exactly one warning, which names it.
run NCCL_RESILIENT_NO_SUCH_KNOB=1
[ "$(grep -c 'WARN' "$work/err")" -eq 1 ] || fail "expected one warning for an unknown knob"
grep -q 'unknown variable NCCL_RESILIENT_NO_SUCH_KNOB="1" (from environment) is ignored' "$work/err" ||
  fail "the warning does not name the unknown knob"

# 2. A non-numeric value for a numeric knob: one warning with value and range; default used.
run NCCL_RESILIENT_WARN_INTERVAL_MS=often
[ "$(grep -c 'WARN' "$work/err")" -eq 1 ] || fail "expected one warning for a non-numeric value"
grep -q 'NCCL_RESILIENT_WARN_INTERVAL_MS="often" (from environment) is not valid: expected an integer in \[0, 3600000\] ms; using the default 10000' "$work/err" ||
  fail "the warning does not name variable, value, range and default"
grep -q '^NCCL_RESILIENT_WARN_INTERVAL_MS=10000	(default)$' "$work/out" || fail "the default was not used"

# 3. A conf-file value applies when the environment has none.
printf '# tuning\r\nNCCL_RESILIENT_WARN_INTERVAL_MS = 2500\r\n' >"$work/nccl.conf"
run NCCL_CONF_FILE="$work/nccl.conf"
[ ! -s "$work/err" ] || fail "no warning expected"
grep -q "^NCCL_RESILIENT_WARN_INTERVAL_MS=2500	($work/nccl.conf)\$" "$work/out" || fail "the conf-file value did not apply"

# 4. The environment wins over the file.
run NCCL_CONF_FILE="$work/nccl.conf" NCCL_RESILIENT_WARN_INTERVAL_MS=40
grep -q '^NCCL_RESILIENT_WARN_INTERVAL_MS=40	(environment)$' "$work/out" || fail "the environment did not win"

# 5. NCCL_DEBUG, here from a conf file, feeds NCCL_RESILIENT_LOG_LEVEL when that is unset.
# (~/.nccl.conf comes from the passwd entry, as in NCCL; the unit tests cover it.)
printf 'NCCL_DEBUG=INFO\n' >"$work/debug.conf"
run NCCL_CONF_FILE="$work/debug.conf"
grep -q "^NCCL_RESILIENT_LOG_LEVEL=INFO	(NCCL_DEBUG ($work/debug.conf))\$" "$work/out" ||
  fail "the NCCL_DEBUG fallback did not apply"

echo "resilient-config: unknown knob, bad value, conf file, precedence and fallback all behave"
