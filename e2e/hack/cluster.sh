#!/usr/bin/env bash
# cluster.sh up|down|start-everynode|stop-everynode|start-replica N|stop-replica N|
#   restart-apiserver [SECONDS]|restart-scheduler [with-extender|without-extender]|
#   cert-mode MODE|client-auth on|off|takeover on|off|
#   restart-kcm [--FLAG=VALUE...]: the local everynode cluster.
# (up is up-control-plane, then install-everynode; e2e.sh runs tests between
# the two that need a kube-apiserver without everynode.)
#
# up: a kwok cluster with a real control plane (e2e/hack/cluster-up.sh), the
# chart installed by Helm in "external" mode (webhooks reach everynode by
# url:), and everynode running on this host with the chart's ServiceAccount
# token, so the RBAC under test is exactly what the chart grants.
# kube-scheduler is configured with the everynode extender.
# Env: NODES (default 3), CLUSTER_NAME, EXTRA_HELM_ARGS, EVERYNODE_ARGS,
# KCM_CONTROLLERS (kube-controller-manager --controllers).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


# One scheduler and one controller-manager: no leader election, which on a
# busy 2-core machine only makes them exit when a lease renewal is slow.
# kube-scheduler presents its client certificate to the extender, and
# kube-apiserver its own to the webhooks (admission_config, any host: "*"),
# whether or not everynode asks for one (`client-auth on`).
# scheduler_config [ARGS] prints it (ARGS go to everynode scheduler-config).
scheduler_config() {
  "$ROOT/bin/everynode" scheduler-config --no-leader-election \
    --url "$EVERYNODE_URL/extender" --ca-file "$PKI/ca.crt" \
    --client-cert-file "$PKI/scheduler-client.crt" --client-key-file "$PKI/scheduler-client.key" "$@"
}

admission_config() {
  cat >"$STATE/webhook-client.kubeconfig" <<KC
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $PKI/apiserver-client.crt
    client-key: $PKI/apiserver-client.key
KC
  local plugin
  {
    echo "apiVersion: apiserver.config.k8s.io/v1"
    echo "kind: AdmissionConfiguration"
    echo "plugins:"
    for plugin in ValidatingAdmissionWebhook MutatingAdmissionWebhook; do
      cat <<YAML
- name: $plugin
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $STATE/webhook-client.kubeconfig
YAML
    done
  } >"$STATE/admission-config.yaml"
}

# The audit log is how the fault scenarios (e2e/faults_test.go) count pod
# creates per node and revision, and everynode's requests after a
# kube-apiserver restart: pod creates at Request level (the pod with its
# labels and target-node annotation), everynode's other requests at
# Metadata, nothing else.
audit_policy() {
  cat >"$STATE/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  verbs: [create]
  resources: [{group: "", resources: [pods]}]
- level: Metadata
  users: ["system:serviceaccount:$NAMESPACE:$RELEASE"]
- level: None
YAML
}

# kwok plays the kubelet with the Stages in e2e/kwok/stages.yaml on top of
# its default ones (images that never pull, crash loops, in-place image
# changes; e2e/kwok/README.md): a second --config for the kwok controller.
# (Stages given to kwokctl itself would replace all of kwok's defaults,
# node Stages included.) bench.sh does the same.
# KCM_CONTROLLERS (e.g. '*,-daemonset-controller', conformance.sh's takeover
# mode) goes in the same patch: several flags of one component belong in
# componentsPatches, not in repeated --extra-args (cluster-up.sh).
kwokctl_config() {
  cat >"$STATE/kwokctl.yaml" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - key: admission-control-config-file
    value: "$STATE/admission-config.yaml"
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
$(if [[ -n "${KCM_CONTROLLERS:-}" ]]; then printf '  - key: controllers\n    value: "%s"\n' "$KCM_CONTROLLERS"; fi)
- name: kwok-controller
  extraArgs:
  - key: config
    value: "$ROOT/e2e/kwok/stages.yaml"
YAML
}


# service_account_kubeconfig writes a kubeconfig that authenticates as the
# chart's ServiceAccount, with a token from the TokenRequest API.
service_account_kubeconfig() {
  local token server ca
  token="$(kubectl -n "$NAMESPACE" create token "$RELEASE" --duration 24h)"
  server="$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')"
  # --flatten inlines a CA given by file (as kwokctl writes it) as data.
  ca="$(kubectl config view --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  cat >"$EVERYNODE_KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "$server", certificate-authority-data: "$ca"}}]
users: [{name: everynode, user: {token: "$token"}}]
contexts: [{name: everynode, context: {cluster: e2e, user: everynode, namespace: "$NAMESPACE"}}]
current-context: everynode
KC
  chmod 600 "$EVERYNODE_KUBECONFIG"
}

# The serving certificate comes from the harness's CA (lib.sh) unless
# `cert-mode self-signed` switched to everynode's own CA: kept in the Secret
# $RELEASE-ca and written into the webhook configurations by everynode, the
# chart's default mode in a real cluster. The mode is remembered in
# $STATE/cert-mode, so a restart (start-everynode) keeps it.
CERT_MODE_FILE="$STATE/cert-mode"
cert_args() {
  case "$(cat "$CERT_MODE_FILE" 2>/dev/null)" in
    self-signed) echo "--cert-mode self-signed --ca-secret-name $RELEASE-ca --tls-dns-names localhost --webhook-configurations $RELEASE,$RELEASE" ;;
    cert-manager) echo "--cert-mode file --tls-cert-file $CM_STATE/tls.crt --tls-key-file $CM_STATE/tls.key" ;;
    *) echo "--cert-mode file --tls-cert-file $PKI/tls.crt --tls-key-file $PKI/tls.key" ;;
  esac
}

# client-auth on|off: everynode asks every caller of the webhook and
# extender port for a client certificate of the harness's client CA
# (--client-ca-file), or not (the default). kube-apiserver and
# kube-scheduler always present theirs. Remembered in $STATE/client-auth.
CLIENT_AUTH_FILE="$STATE/client-auth"
client_auth_args() {
  [[ "$(cat "$CLIENT_AUTH_FILE" 2>/dev/null)" == on ]] && echo "--client-ca-file $PKI/client-ca.crt"
  return 0
}
client_auth() {
  case "${1:-}" in
    on|off) echo "$1" >"$CLIENT_AUTH_FILE" ;;
    *) echo "usage: $0 client-auth on|off" >&2; exit 2 ;;
  esac
  start_everynode
}

# takeover on|off: kube-controller-manager without its DaemonSet controller
# and everynode with --takeover (the chart with takeover.enabled), so
# everynode reconciles apps/v1 DaemonSets; or both back as `up` starts
# them. Quick probe and retry, for the scenarios. Remembered in
# $STATE/takeover-mode (not "takeover": conformance.sh keeps its report
# there), so a later start-everynode keeps it.
TAKEOVER_FILE="$STATE/takeover-mode"
takeover_args() {
  [[ "$(cat "$TAKEOVER_FILE" 2>/dev/null)" == on ]] && echo "--takeover --takeover-probe-timeout=5s --takeover-retry=5s"
  return 0
}
takeover() {
  local controllers enabled
  case "${1:-}" in
    on) controllers="${TAKEOVER_KCM_CONTROLLERS:-*,-daemonset-controller}" enabled=true ;;
    off) controllers="${KCM_CONTROLLERS:-*}" enabled=false ;;
    *) echo "usage: $0 takeover on|off" >&2; exit 2 ;;
  esac
  stop_everynode
  # Its own credentials again, whatever restart-kcm gave it.
  restart_component kube-controller-manager 0 "--controllers=$controllers" --use-service-account-credentials=false
  echo "$1" >"$TAKEOVER_FILE"
  EXTRA_HELM_ARGS="--set takeover.enabled=$enabled ${EXTRA_HELM_ARGS:-}" install_chart
  start_everynode
}

# cert-manager's controller and cainjector, built from its library module
# by tools.sh (e2e/tools/certmanager), run on this host like everynode, with
# the admin kubeconfig; its CRDs come from the same module.
CM_STATE="$STATE/cert-manager"
start_cert_manager() {
  mkdir -p "$CM_STATE"
  local crds
  crds="$(cd "$ROOT/e2e/tools/certmanager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds"
  kubectl apply --server-side -f "$crds" >/dev/null
  local c
  for c in controller cainjector; do
    if [[ -f "$CM_STATE/$c.pid" ]] && kill -0 "$(cat "$CM_STATE/$c.pid")" 2>/dev/null; then continue; fi
    nohup "$BIN/cert-manager-$c" --kubeconfig "$KUBECONFIG" >>"$LOGS/cert-manager-$c.log" 2>&1 &
    echo $! >"$CM_STATE/$c.pid"
  done
}
stop_cert_manager() {
  local c
  for c in controller cainjector; do
    [[ -f "$CM_STATE/$c.pid" ]] || continue
    kill "$(cat "$CM_STATE/$c.pid")" 2>/dev/null || true
    rm -f "$CM_STATE/$c.pid"
  done
}

# cert-manager writes the serving certificate into the Secret <release>-tls;
# in a cluster the Deployment mounts it, here it is copied to files.
serving_secret_issued() {
  [[ -n "$(kubectl -n "$NAMESPACE" get secret "$RELEASE-tls" -o jsonpath='{.data.tls\.key}' 2>/dev/null)" ]]
}
serving_secret_to_files() {
  printf 'waiting for cert-manager to issue the serving certificate'
  wait_for "the Secret $RELEASE-tls" 120 serving_secret_issued
  echo " ok"
  (umask 077
   kubectl -n "$NAMESPACE" get secret "$RELEASE-tls" -o jsonpath='{.data.tls\.crt}' | base64 -d >"$CM_STATE/tls.crt"
   kubectl -n "$NAMESPACE" get secret "$RELEASE-tls" -o jsonpath='{.data.tls\.key}' | base64 -d >"$CM_STATE/tls.key")
}

# cert_mode self-signed|cert-manager|external-ca reinstalls the chart in that
# mode (so the RBAC is the mode's own) and restarts everynode to match.
# Self-signed certificates carry DNS names only, so in that mode the webhooks
# are called at https://localhost:PORT instead of 127.0.0.1; cert-manager's
# certificate names 127.0.0.1 as an IP address (the chart adds the URL's
# host). kube-scheduler reads its extender CA once, at start, so it is
# restarted to trust the mode's CA (restart_scheduler).
cert_mode() {
  stop_everynode
  case "$1" in
    self-signed)
      stop_cert_manager
      EXTRA_HELM_ARGS="--set external.url=https://localhost:$EVERYNODE_PORT --set tls.caBundle= ${EXTRA_HELM_ARGS:-}" install_chart
      echo self-signed >"$CERT_MODE_FILE"
      ;;
    cert-manager)
      start_cert_manager
      EXTRA_HELM_ARGS="--set certManager.enabled=true --set tls.caBundle= ${EXTRA_HELM_ARGS:-}" install_chart
      serving_secret_to_files
      echo cert-manager >"$CERT_MODE_FILE"
      ;;
    external-ca)
      # The caBundle fields belong to everynode or cert-manager's cainjector
      # by now (server-side apply managers): the harness's CA must win.
      EXTRA_HELM_ARGS="--force-conflicts ${EXTRA_HELM_ARGS:-}" install_chart
      stop_cert_manager
      rm -f "$CERT_MODE_FILE"
      kubectl -n "$NAMESPACE" delete secret "$RELEASE-ca" "$RELEASE-tls" --ignore-not-found >/dev/null
      ;;
    *) echo "usage: $0 cert-mode self-signed|cert-manager|external-ca" >&2; exit 2 ;;
  esac
  service_account_kubeconfig
  start_everynode
  restart_scheduler with-extender
}

# launch_everynode PIDFILE LOG PORT HEALTH_PORT starts one everynode
# replica on this host and waits for its /readyz.
launch_everynode() {
  local pidfile="$1" log="$2" port="$3" health="$4"
  # shellcheck disable=SC2046,SC2086
  nohup "$ROOT/bin/everynode" serve \
    --kubeconfig "$EVERYNODE_KUBECONFIG" --namespace "$NAMESPACE" \
    --leader-election-id "$RELEASE" \
    $(cert_args) $(client_auth_args) $(takeover_args) \
    --secure-addr "127.0.0.1:$port" --health-addr "127.0.0.1:$health" \
    --profiling -v 2 ${EVERYNODE_ARGS:-} >>"$log" 2>&1 &
  echo $! >"$pidfile"
  printf 'waiting for everynode /readyz'
  if ! wait_for "everynode /readyz" 60 curl -fsS "http://127.0.0.1:$health/readyz"; then
    tail -20 "$log" >&2
    return 1
  fi
  echo " ready"
}

# stop_pidfile PIDFILE: SIGTERM (graceful shutdown, which releases the
# leader Lease), then SIGKILL after 15 s.
stop_pidfile() {
  [[ -f "$1" ]] || return 0
  local pid; pid="$(cat "$1")"
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

start_everynode() {
  stop_everynode
  say "starting everynode as system:serviceaccount:$NAMESPACE:$RELEASE (log: $EVERYNODE_LOG)"
  launch_everynode "$EVERYNODE_PID" "$EVERYNODE_LOG" "$EVERYNODE_PORT" "$EVERYNODE_HEALTH_PORT"
}

stop_everynode() { stop_pidfile "$EVERYNODE_PID"; }

# start_replica N: another everynode replica sharing the leader Lease
# (e2e/faults_test.go), on ports EVERYNODE_PORT+N and
# EVERYNODE_HEALTH_PORT+N. The webhooks and kube-scheduler keep calling
# the first one. Its pid is in $STATE/everynode-N.pid.
start_replica() {
  local n="${1:?usage: start-replica N}"
  stop_pidfile "$STATE/everynode-$n.pid"
  say "starting everynode replica $n (log: $LOGS/everynode-$n.log)"
  # A fresh log: scenarios read it.
  : >"$LOGS/everynode-$n.log"
  launch_everynode "$STATE/everynode-$n.pid" "$LOGS/everynode-$n.log" \
    $((EVERYNODE_PORT + n)) $((EVERYNODE_HEALTH_PORT + n))
}

stop_replica() { stop_pidfile "$STATE/everynode-${1:?usage: stop-replica N}.pid"; }

# restart_apiserver [SECONDS]: stops kube-apiserver, waits SECONDS (default
# 5), and starts it again with the same command line. etcd keeps the data.
restart_apiserver() {
  restart_component kube-apiserver "${1:-5}"
  wait_for "kube-apiserver /readyz" 120 kubectl get --raw /readyz
}

# restart_scheduler [with-extender|without-extender]: kube-scheduler again,
# with the extender (the default) trusting the CA of the cert mode (in
# self-signed mode the bundle of everynode's CA Secret, read once at start
# as kube-scheduler does, and localhost, the name the certificate carries),
# or with no extender at all, as on a managed cluster.
restart_scheduler() {
  local dir="$KWOK_WORKDIR/clusters/$CLUSTER_NAME"
  local kc="$dir/kubeconfig.yaml"
  case "${1:-with-extender}" in
    with-extender)
      case "$(cat "$CERT_MODE_FILE" 2>/dev/null)" in
        self-signed)
          kubectl -n "$NAMESPACE" get secret "$RELEASE-ca" -o jsonpath='{.data.ca-bundle\.crt}' | base64 -d >"$STATE/self-signed-ca-bundle.crt"
          [[ -s "$STATE/self-signed-ca-bundle.crt" ]] || { echo "the Secret $RELEASE-ca has no ca-bundle.crt" >&2; return 1; }
          scheduler_config --scheduler-kubeconfig "$kc" --url "https://localhost:$EVERYNODE_PORT/extender" \
            --ca-file "$STATE/self-signed-ca-bundle.crt" >"$dir/scheduler.yaml" ;;
        cert-manager)
          kubectl -n "$NAMESPACE" get secret "$RELEASE-tls" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$CM_STATE/ca.crt"
          scheduler_config --scheduler-kubeconfig "$kc" --ca-file "$CM_STATE/ca.crt" >"$dir/scheduler.yaml" ;;
        *) scheduler_config --scheduler-kubeconfig "$kc" >"$dir/scheduler.yaml" ;;
      esac ;;
    without-extender)
      cat >"$dir/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $kc
leaderElection:
  leaderElect: false
YAML
      ;;
    *) echo "usage: $0 restart-scheduler [with-extender|without-extender]" >&2; exit 2 ;;
  esac
  restart_component kube-scheduler 0
  local port
  port="$(tr '\0' '\n' <"/proc/$(cat "$dir/pids/kube-scheduler.pid")/cmdline" | sed -n 's/^--secure-port=//p')"
  # 120 s: once, under make check's load, a restarted kube-scheduler was
  # not ready after 60 s (the cause is not known). On a timeout its log
  # may say why.
  wait_for "kube-scheduler /readyz" 120 curl -fsSk "https://127.0.0.1:$port/readyz" || {
    echo "kube-scheduler's log, last 40 lines:" >&2
    tail -40 "$dir/logs/kube-scheduler.log" >&2
    return 1
  }
}

# restart_component NAME SECONDS [--FLAG=VALUE...]: stops one of kwokctl's
# components, waits SECONDS, and starts it again with the same command line
# (kwokctl's binary runtime has no command for one component), with each
# --FLAG=VALUE in place of any --FLAG= it had, or added.
restart_component() {
  local dir="$KWOK_WORKDIR/clusters/$CLUSTER_NAME" pid cwd name="$1" flag
  pid="$(cat "$dir/pids/$name.pid")"
  local -a cmd
  mapfile -d '' cmd <"/proc/$pid/cmdline"
  for flag in "${@:3}"; do
    local -a kept=()
    local a
    for a in "${cmd[@]}"; do [[ "$a" == "${flag%%=*}="* ]] || kept+=("$a"); done
    cmd=("${kept[@]}" "$flag")
  done
  cwd="$(readlink "/proc/$pid/cwd")"
  kill "$pid"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  sleep "$2"
  # exec: $! is the component itself (for the pid file), and no shell
  # keeps the caller's stdout open.
  (cd "$cwd" && exec nohup "${cmd[@]}") >>"$dir/logs/$name.log" 2>&1 </dev/null &
  # No newline: kwokctl reads the file with strconv.Atoi, and with one it
  # takes the component for stopped, so `kwokctl delete cluster` (cluster.sh
  # down) would leave the restarted process running.
  printf '%s' "$!" >"$dir/pids/$name.pid"
}

# up_control_plane starts the cluster without everynode: kube-apiserver,
# etcd, kube-controller-manager, kube-scheduler (its extender config
# already points at everynode's URL) and kwok with its nodes.
up_control_plane() {
  "$ROOT/e2e/hack/tools.sh"
  [[ -x "$ROOT/bin/everynode" ]] || (cd "$ROOT" && go build -o bin/ ./cmd/everynode)
  pki
  rm -f "$CERT_MODE_FILE" "$CLIENT_AUTH_FILE" "$TAKEOVER_FILE"
  scheduler_config >"$STATE/scheduler-config.yaml"
  admission_config
  kwokctl_config
  audit_policy
  # KCM_CONTROLLERS is in kwokctl.yaml already: not again as --extra-args.
  KCM_CONTROLLERS='' SCHEDULER_CONFIG="$STATE/scheduler-config.yaml" "$ROOT/e2e/hack/cluster-up.sh" \
    --config "$STATE/kwokctl.yaml" --kube-audit-policy "$STATE/audit-policy.yaml"
}

install_everynode() {
  install_chart
  service_account_kubeconfig
  start_everynode
}

up() {
  local start=$SECONDS
  up_control_plane
  install_everynode
  say "cluster up in $((SECONDS - start))s"
  cat <<MSG
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH
  kubectl get nodes; kubectl get eds -A
  everynode log: $EVERYNODE_LOG    metrics: http://127.0.0.1:$EVERYNODE_HEALTH_PORT/metrics
  stop it all: make cluster-down
MSG
}

down() {
  local f
  for f in "$STATE"/everynode-*.pid; do [[ -e "$f" ]] && stop_pidfile "$f"; done
  stop_everynode
  stop_cert_manager
  "$ROOT/e2e/hack/cluster-down.sh"
}

case "${1:-}" in
  up) up ;;
  up-control-plane) up_control_plane ;;
  install-everynode) install_everynode ;;
  down) down ;;
  start-everynode) service_account_kubeconfig; start_everynode ;;
  stop-everynode) stop_everynode ;;
  start-replica) start_replica "${2:-}" ;;
  stop-replica) stop_replica "${2:-}" ;;
  restart-apiserver) restart_apiserver "${2:-}" ;;
  restart-scheduler) restart_scheduler "${2:-}" ;;
  cert-mode) cert_mode "${2:-}" ;;
  client-auth) service_account_kubeconfig; client_auth "${2:-}" ;;
  takeover) service_account_kubeconfig; takeover "${2:-}" ;;
  # kube-controller-manager with other flags (e.g. its DaemonSet controller
  # on, under its own ServiceAccount: the takeover lock's scenario).
  restart-kcm) shift; restart_component kube-controller-manager 0 "$@" ;;
  *) echo "usage: $0 up|up-control-plane|install-everynode|down|start-everynode|stop-everynode|start-replica N|stop-replica N|restart-apiserver [SECONDS]|restart-scheduler [with-extender|without-extender]|cert-mode self-signed|cert-manager|external-ca|client-auth on|off|takeover on|off|restart-kcm [--FLAG=VALUE...]" >&2; exit 2 ;;
esac
