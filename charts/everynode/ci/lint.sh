#!/usr/bin/env bash
# Lints and renders the everynode chart with every switch, and checks that the
# schema and the template guards refuse bad values. Called by `make chart-lint`
# with the helm binary in $HELM; needs nothing else (no cluster, no network).
#
#   HELM=.e2e/bin/helm charts/everynode/ci/lint.sh
set -euo pipefail

HELM="${HELM:-helm}"
CHART="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
# A real PEM is not needed to render; any base64 proves the value flows through.
CA="$(printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' | base64 | tr -d '\n')"
fails=0

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# render <name> <helm args...>: lint --strict and template into $OUT/<name>.yaml.
render() {
  local name="$1"; shift
  echo "== $name: $*"
  if ! "$HELM" lint --strict "$CHART" --namespace everynode-system "$@" >"$OUT/$name.lint" 2>&1; then
    cat "$OUT/$name.lint" >&2; fail "$name: helm lint"
  fi
  if ! "$HELM" template everynode "$CHART" --namespace everynode-system "$@" >"$OUT/$name.yaml" 2>"$OUT/$name.err"; then
    cat "$OUT/$name.err" >&2; fail "$name: helm template"
  fi
}

# has/hasnt <name> <extended regex>: the rendered manifest must (not) match.
has()   { grep -Eq -- "$2" "$OUT/$1.yaml" || fail "$1: expected /$2/"; }
hasnt() { ! grep -Eq -- "$2" "$OUT/$1.yaml" || fail "$1: unexpected /$2/"; }
# count <name> <n> <regex>: exactly n lines match.
count() { local c; c="$(grep -Ec -- "$3" "$OUT/$1.yaml" || true)"; [[ "$c" == "$2" ]] || fail "$1: /$3/ matched $c times, want $2"; }

# refuse <name> <expected message regex> <helm args...>: template must fail.
refuse() {
  local name="$1" want="$2"; shift 2
  echo "== refuse $name: $*"
  if "$HELM" template everynode "$CHART" --namespace everynode-system "$@" >/dev/null 2>"$OUT/$name.err"; then
    fail "$name: rendered, want an error"
  elif ! grep -Eq -- "$want" "$OUT/$name.err"; then
    cat "$OUT/$name.err" >&2; fail "$name: error does not match /$want/"
  fi
}

render default
has default '^kind: Deployment$'
has default '^  replicas: 2$'
has default '^kind: PodDisruptionBudget$'
has default '^kind: Service$'
has default '"--cert-mode=self-signed"'
has default "name: not-made-whole-by-the-controller"
has default "request.userInfo.username == 'system:serviceaccount:everynode-system:everynode' && has\\(object.metadata.annotations\\) && 'everynode.io/made-whole' in object.metadata.annotations"
has default '"--ca-secret-name=everynode-ca"'
has default '"--tls-dns-names=everynode.everynode-system.svc,everynode.everynode-system.svc.cluster.local"'
has default '"--webhook-configurations=everynode,everynode"'
has default '"--leader-elect=true"'
has default '"--leader-elect-lease-duration=15s"'
# The leader fence: the controller's own annotated creates, the Lease as param.
has default '^  name: everynode-leader-fence$'
has default 'expression: request.userInfo.username == "system:serviceaccount:everynode-system:everynode"$'
count default 1 '^    kind: Lease$'
has default 'parameterNotFoundAction: Allow'
has default '"--controller-username=system:serviceaccount:everynode-system:everynode"'
# /validate/pod skips exactly the identity the controller runs as, and
# /mutate/pod the pods that identity marked made whole.
count default 2 '^    matchConditions:$'
has default "expression: \"request.userInfo.username != 'system:serviceaccount:everynode-system:everynode'\""
has default 'image: "ghcr.io/everynode/everynode:0.1.0"'
has default 'readOnlyRootFilesystem: true'
has default 'runAsNonRoot: true'
has default 'type: RuntimeDefault'
has default 'topologyKey: kubernetes.io/hostname'
has default 'path: /healthz'
has default 'path: /readyz'
has default 'fieldPath: metadata.namespace'
# Graceful shutdown: preStop sleep, then --shutdown-delay and the drain, all
# inside the grace period.
has default '"--shutdown-delay=5s"'
has default '"--shutdown-drain-timeout=20s"'
has default '^      terminationGracePeriodSeconds: 40$'
count default 1 '^            preStop:$'
has default '^                seconds: 5$'
count default 4 '^    failurePolicy: Fail$'
count default 1 '^    failurePolicy: Ignore$'
count default 5 '^    sideEffects: None$'
count default 5 '^    matchPolicy: Equivalent$'
count default 5 'operator: NotIn'
count default 5 'values: \["kube-system","kube-node-lease","everynode-system"\]'
count default 2 'everynode.io/daemon-pod: "true"'
count default 5 '^        port: 443$'
has default 'reinvocationPolicy: IfNeeded'
has default 'resourceNames: \["everynode-ca"\]'
# One policy by default: the leader fence (the takeover lock is opt-in).
count default 1 '^kind: ValidatingAdmissionPolicy$'
# The controller knows the namespaces the webhooks skip, to warn about sets
# there whose nodeOverrides cannot apply.
has default '"--webhook-skipped-namespaces=kube-system,kube-node-lease,everynode-system"$'
hasnt default 'caBundle:'
hasnt default 'cert-manager.io'
hasnt default 'kube-scheduler'
hasnt default '"--scheduler-name'
hasnt default 'resources: \["pods/binding"\]'

render skipped --set 'webhooks.excludeNamespaces={infra}'
has skipped '"--webhook-skipped-namespaces=kube-system,kube-node-lease,everynode-system,infra"$'
count skipped 5 '^          values: \["kube-system","kube-node-lease","everynode-system","infra"\]$'

render external-ca --set external.url=https://127.0.0.1:8443 --set tls.caBundle=LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
count external-ca 5 'caBundle: LS0t'
count external-ca 5 'url: "https://127.0.0.1:8443/'
hasnt external-ca '^kind: Deployment$'

render certmanager --set certManager.enabled=true
has certmanager '"--cert-mode=file"'
has certmanager '"--tls-cert-file=/tls/tls.crt"'
has certmanager '"--tls-key-file=/tls/tls.key"'
has certmanager 'mountPath: /tls'
has certmanager 'secretName: everynode-tls'
count certmanager 2 'cert-manager.io/inject-ca-from: everynode-system/everynode-serving'
count certmanager 2 '^kind: Issuer$'
count certmanager 2 '^kind: Certificate$'
has certmanager 'isCA: true'
hasnt certmanager '"--ca-secret-name'
hasnt certmanager 'resources: \["secrets"\]'
hasnt certmanager 'validatingwebhookconfigurations'
hasnt certmanager 'ipAddresses:'

# cert-manager with everynode outside the cluster: the certificate names the
# URL's host too, as a DNS name or as an IP address.
render certmanager-external-dns --set certManager.enabled=true --set external.url=https://localhost:8443
has certmanager-external-dns '^    - localhost$'
hasnt certmanager-external-dns 'ipAddresses:'
render certmanager-external-ip --set certManager.enabled=true --set external.url=https://127.0.0.1:8443
has certmanager-external-ip '^    - "127.0.0.1"$'
count certmanager-external-ip 1 '^  ipAddresses:$'
render certmanager-external-ipv6 --set certManager.enabled=true --set 'external.url=https://[::1]:8443'
has certmanager-external-ipv6 '^    - "::1"$'

render certmanager-issuer --set certManager.enabled=true \
  --set certManager.issuerRef.name=corp-ca --set certManager.issuerRef.kind=ClusterIssuer
count certmanager-issuer 1 '^kind: Certificate$'
hasnt certmanager-issuer '^kind: Issuer$'
has certmanager-issuer 'name: corp-ca'

render existing-secret --set tls.existingSecret=x --set tls.caBundle="$CA"
has existing-secret '"--cert-mode=file"'
has existing-secret 'secretName: x$'
count existing-secret 5 "caBundle: $CA"
hasnt existing-secret 'cert-manager.io'
hasnt existing-secret 'resources: \["secrets"\]'

render external --set external.url=https://127.0.0.1:8443
hasnt external '^kind: Deployment$'
hasnt external '^kind: Service$'
hasnt external '^kind: PodDisruptionBudget$'
hasnt external 'service:'
has external '^kind: ServiceAccount$'
has external '^kind: ClusterRole$'
has external 'url: "https://127.0.0.1:8443/mutate/daemonset"'
has external 'url: "https://127.0.0.1:8443/validate/daemonset"'
has external 'url: "https://127.0.0.1:8443/mutate/pod"'
has external 'url: "https://127.0.0.1:8443/validate/pod"'

render scheduler --set scheduler.enabled=true
has scheduler 'image: "registry.k8s.io/kube-scheduler:v1.37.2"'
has scheduler '"--scheduler-name=everynode-scheduler"'
has scheduler 'kind: KubeSchedulerConfiguration'
has scheduler 'resourceName: everynode-scheduler'
has scheduler 'schedulerName: everynode-scheduler'
has scheduler 'urlPrefix: https://everynode.everynode-system.svc:443/extender'
has scheduler 'nodeCacheCapable: true'
has scheduler 'ignorable: true'
# Self-signed: the bundle with the next CA, which survives a rotation.
has scheduler 'caFile: /etc/everynode/ca/ca-bundle.crt'
has scheduler 'key: ca-bundle.crt'
has scheduler 'httpTimeout: 1s'
# Daemon pods only: the marker they request, ignored by the scheduler.
has scheduler '"--daemon-resource=everynode.io/daemon"'
has scheduler '  - name: everynode.io/daemon'
has scheduler 'ignoredByScheduler: true'
hasnt scheduler 'prioritizeVerb'
has scheduler 'name: system:kube-scheduler'
has scheduler 'name: system:volume-scheduler'
has scheduler 'name: extension-apiserver-authentication-reader'

render scheduler-no-marker --set scheduler.enabled=true --set scheduler.daemonResource=
has scheduler-no-marker '"--daemon-resource="'
hasnt scheduler-no-marker 'managedResources'
refuse scheduler-bad-marker 'daemonResource' --set scheduler.daemonResource=daemon

render scheduler-certmanager --set scheduler.enabled=true --set certManager.enabled=true
has scheduler-certmanager 'caFile: /etc/everynode/ca/ca.crt'

render scheduler-existing --set scheduler.enabled=true --set tls.existingSecret=x --set tls.caBundle="$CA"
has scheduler-existing "caData: $CA"

render single-replica --set replicaCount=1
has single-replica '^  replicas: 1$'
hasnt single-replica '^kind: PodDisruptionBudget$'

render own-service-account --set serviceAccount.create=false --set serviceAccount.name=ops-daemons
has own-service-account '"--controller-username=system:serviceaccount:everynode-system:ops-daemons"'
has own-service-account "expression: \"request.userInfo.username != 'system:serviceaccount:everynode-system:ops-daemons'\""
has own-service-account 'expression: request.userInfo.username == "system:serviceaccount:everynode-system:ops-daemons"$'

render no-leader-election --set leaderElection.enabled=false --set replicaCount=1
has no-leader-election '"--leader-elect=false"'
hasnt no-leader-election 'leader-fence'

render no-leader-fence --set leaderElection.fence=false
hasnt no-leader-fence 'leader-fence'

render no-prestop --set shutdown.preStopSleepSeconds=0 --set shutdown.delaySeconds=10 \
  --set shutdown.drainTimeoutSeconds=30 --set shutdown.terminationGracePeriodSeconds=45
hasnt no-prestop 'preStop:'
has no-prestop '"--shutdown-delay=10s"'
has no-prestop '"--shutdown-drain-timeout=30s"'
has no-prestop '^      terminationGracePeriodSeconds: 45$'

# Monitoring: each piece off by default, on by its own switch.
hasnt default 'monitoring.coreos.com'
hasnt default 'grafana_dashboard'
render monitoring --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
  --set metrics.grafanaDashboard.enabled=true
count monitoring 1 '^kind: ServiceMonitor$'
count monitoring 1 '^kind: PrometheusRule$'
has monitoring '^      honorLabels: true$'
has monitoring '^    - port: metrics$'
has monitoring '^      interval: 30s$'
has monitoring 'everynode_leader\{job="everynode"\}'
for a in EverynodeRolloutStalled EverynodeDaemonPodsUnavailable EverynodePodCreatesFailing EverynodeLeaderMissing \
  EverynodeWebhookErrors EverynodeWebhookSlow EverynodeExtenderErrors EverynodeExtenderSlow; do
  count monitoring 1 "^        - alert: $a$"
done
# Alert templates reach Prometheus as {{ $labels.x }}, not expanded by helm.
has monitoring 'summary: .*\{\{ \$labels.namespace \}\}/\{\{ \$labels.name \}\}'
has monitoring '^    grafana_dashboard: "1"$'
has monitoring '^  everynode.json: \|-$'
render monitoring-sm-only --set metrics.serviceMonitor.enabled=true
count monitoring-sm-only 1 '^kind: ServiceMonitor$'
hasnt monitoring-sm-only '^kind: PrometheusRule$'
hasnt monitoring-sm-only 'grafana_dashboard'
render monitoring-tuned --set metrics.prometheusRule.enabled=true --set metrics.prometheusRule.rolloutStalledFor=2h \
  --set metrics.prometheusRule.severity=critical --set metrics.prometheusRule.labels.release=kps \
  --set metrics.grafanaDashboard.enabled=true --set metrics.grafanaDashboard.namespace=monitoring \
  --set metrics.grafanaDashboard.labels.team=ops --set metrics.grafanaDashboard.annotations.grafana_folder=Kubernetes
count monitoring-tuned 1 '^          for: 2h$'
has monitoring-tuned '^            severity: critical$'
has monitoring-tuned '^    release: kps$'
has monitoring-tuned '^  namespace: monitoring$'
has monitoring-tuned '^    team: ops$'
has monitoring-tuned 'grafana_dashboard: "1"'
has monitoring-tuned '^    grafana_folder: Kubernetes$'
hasnt monitoring-tuned '^kind: ServiceMonitor$'
# No Service outside the cluster, so nothing to scrape.
render monitoring-external --set external.url=https://127.0.0.1:8443 --set metrics.serviceMonitor.enabled=true
hasnt monitoring-external '^kind: ServiceMonitor$'

# NetworkPolicy: off by default; on, the two ports with their peers.
hasnt default '^kind: NetworkPolicy$'
render netpol --set networkPolicy.enabled=true --set-json 'networkPolicy.https.from=[{"ipBlock":{"cidr":"10.0.0.0/24"}}]' \
  --set-json 'networkPolicy.metrics.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]'
has netpol '^kind: NetworkPolicy$'
has netpol 'cidr: 10.0.0.0/24'
has netpol 'kubernetes.io/metadata.name: monitoring'
count netpol 2 '^        - port: (https|metrics)$'
render netpol-open --set networkPolicy.enabled=true
hasnt netpol-open '^      from:$'
render netpol-external --set networkPolicy.enabled=true --set external.url=https://127.0.0.1:8443
hasnt netpol-external '^kind: NetworkPolicy$'

# Client certificates: the flag, the ConfigMap, the scheduler's certFile.
hasnt default 'client-ca-file'
render clientauth -f "$CHART/ci/clientauth-values.yaml"
has clientauth '"--client-ca-file=/client-ca/ca.crt"'
has clientauth '^  name: everynode-client-ca$'
has clientauth 'certFile: /etc/everynode/client/tls.crt'
has clientauth 'secretName: scheduler-client'
refuse clientauth-no-scheduler-secret 'clientAuth.schedulerSecret' -f "$CHART/ci/clientauth-values.yaml" --set clientAuth.schedulerSecret=
refuse clientauth-base64 'must be PEM' --set clientAuth.caBundle=TUlJQg==

# Startup taint: the flag and nodes update only when set.
hasnt default 'startup-taint'
render startup-taint --set startupTaint=everynode.io/agents-not-ready
has startup-taint '"--startup-taint=everynode.io/agents-not-ready"'
# The daemonsets rule has the same verbs (rollback): one more line with them.
count default 1 'verbs: \["get", "list", "watch", "update"\]'
count startup-taint 2 'verbs: \["get", "list", "watch", "update"\]'

# Takeover: the lock policy, its flag and RBAC come with it; an empty
# identity list means no lock and an empty flag (the probe alone).
hasnt default 'takeover'
render takeover --set takeover.enabled=true
count takeover 2 '^kind: ValidatingAdmissionPolicy$'
has takeover '^  name: everynode-takeover-lock$'
has takeover '"--takeover-lock-policy=everynode-takeover-lock"'
has takeover 'expression: request.userInfo.username in \["system:serviceaccount:kube-system:daemon-set-controller"\]'
has takeover 'resources: \["validatingadmissionpolicybindings"\]'
render takeover-nolock --set takeover.enabled=true --set 'takeover.lockedIdentities=null'
hasnt takeover-nolock 'name: everynode-takeover-lock'
hasnt takeover-nolock 'validatingadmissionpolicybindings'
has takeover-nolock '"--takeover-lock-policy="'
refuse bad-identities 'lockedIdentities' --set 'takeover.lockedIdentities[0]='
refuse startup-taint-bad 'startupTaint' --set 'startupTaint=bad key!'

# Every values file under ci/ (chart-testing convention) renders too.
for f in "$CHART"/ci/*-values.yaml; do
  [[ -e "$f" ]] || continue
  render "values-$(basename "$f" -values.yaml)" -f "$f"
done

refuse replica-not-int 'replicaCount' --set replicaCount=abc
refuse replica-zero 'replicaCount' --set replicaCount=0
refuse unknown-key 'additional propert|not allowed|unknown|additionalProperties' --set replicas=3
refuse bad-pull-policy 'pullPolicy' --set image.pullPolicy=Sometimes
refuse http-url 'url' --set external.url=http://127.0.0.1:8443
refuse two-cert-modes 'mutually exclusive' --set certManager.enabled=true --set tls.existingSecret=x --set tls.caBundle="$CA"
refuse secret-without-ca 'needs tls.caBundle' --set tls.existingSecret=x
refuse issuer-without-cm 'only used with certManager' --set certManager.issuerRef.name=x
refuse negative-delay 'delaySeconds' --set shutdown.delaySeconds=-1
refuse bad-for 'rolloutStalledFor' --set metrics.prometheusRule.rolloutStalledFor=soon
refuse bad-ratio 'errorRatio' --set metrics.prometheusRule.errorRatio=5
refuse grace-too-short 'terminationGracePeriodSeconds \(30\) must exceed .* \(30\)' --set shutdown.terminationGracePeriodSeconds=30

if ((fails)); then
  echo "chart-lint: $fails check(s) failed" >&2
  exit 1
fi
echo "chart-lint: ok"
