#!/usr/bin/env bash
# `npm audit --omit=dev --audit-level=high`: a high or critical advisory in a production dependency fails.
# When the registry's advisory endpoint itself cannot be reached (some mirrors and sandboxes refuse its POST),
# the audit did not happen: that is said loudly and, unless AUDIT_STRICT=true, does not fail the build, since
# it says nothing about the dependencies.
set -uo pipefail
cd "$(dirname "$0")/.."
err="$(mktemp)"
trap 'rm -f "$err"' EXIT
npm audit --omit=dev --audit-level=high 2> >(tee "$err" >&2)
status=$?
[ "$status" -eq 0 ] && exit 0
if grep -q 'audit endpoint returned an error' "$err"; then
  echo "!!! npm audit could not reach the advisory endpoint: production dependencies were NOT audited !!!" >&2
  [ "${AUDIT_STRICT:-false}" = "true" ] && exit 1
  exit 0
fi
exit "$status"
