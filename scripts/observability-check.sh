#!/usr/bin/env bash
# Checks deploy/observability with promtool (from Debian's `prometheus` package, installed when
# missing): the alert rules parse (`promtool check rules`, the plain file and the PrometheusRule's
# copy), every alert's unit tests pass (`promtool test rules`), compose's Prometheus config loads,
# every dashboard query parses as PromQL, and the committed dashboards are what
# scripts/observability-dashboards.py writes. scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=deploy/observability

if ! command -v promtool >/dev/null; then
    echo "observability-check: installing promtool (apt-get install prometheus)"
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    # Only the binaries are wanted: no service is started (policy-rc.d refuses, where there is one).
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null ||
        { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
            --no-install-recommends prometheus >/dev/null; }
fi
promtool --version 2>&1 | head -1

work=$(mktemp -d /tmp/observability-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

promtool check rules "$dir/alerts.yml"
promtool test rules "$dir/alerts.test.yml"
promtool check config "$dir/prometheus.yml"

# The PrometheusRule's groups as a rule file of their own (ObservabilityTests checks they equal
# alerts.yml's; this checks Prometheus accepts them as they are there).
sed -n '/^spec:/,$p' "$dir/k8s/prometheusrule.yaml" | tail -n +2 | sed 's/^  //' >"$work/prometheusrule-groups.yml"
promtool check rules "$work/prometheusrule-groups.yml"

# Every dashboard query as a recording rule: promtool parses each one.
python3 - "$dir/dashboards" "$work/dashboard-queries.yml" <<'PY'
import glob, json, os, sys
rules = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    board = json.load(open(path))
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            name = "dashboard:%s:%d%s" % (board["uid"].replace("-", "_"), panel["id"], target["refId"])
            rules.append({"record": name, "expr": target["expr"]})
json.dump({"groups": [{"name": "dashboard-queries", "rules": rules}]}, open(sys.argv[2], "w"))
print("dashboard queries: %d" % len(rules))
PY
promtool check rules "$work/dashboard-queries.yml"

python3 scripts/observability-dashboards.py "$work/dashboards" >/dev/null
diff -r "$work/dashboards" "$dir/dashboards" ||
    { echo "observability-check: the dashboards differ from scripts/observability-dashboards.py's" >&2; exit 1; }
echo "observability-check: rules, alert tests, Prometheus config and dashboards OK"
