# Shared settings of the e2e scripts: sourced, not run.
# The interface other people and scripts rely on (keep it stable):
#   .e2e/kubeconfig   admin kubeconfig of the local cluster
#   .e2e/bin/         kubectl, helm, kwokctl and the control plane binaries
#   make cluster / make cluster-down

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/.e2e"
BIN="$E2E/bin"
PKI="$E2E/pki"
export KWOK_WORKDIR="$E2E/kwok"
export PATH="$BIN:$PATH"

CLUSTER_NAME="${CLUSTER_NAME:-everynode-e2e}"
# The default cluster keeps the documented paths (.e2e/kubeconfig, ...);
# another CLUSTER_NAME (the benchmark's) gets its own files, so two clusters
# can run side by side without touching each other.
if [[ "$CLUSTER_NAME" == everynode-e2e ]]; then
  STATE="$E2E"
  EVERYNODE_PORT="${EVERYNODE_PORT:-18443}"
  EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-18080}"
else
  STATE="$E2E/$CLUSTER_NAME"
  EVERYNODE_PORT="${EVERYNODE_PORT:-28443}"
  EVERYNODE_HEALTH_PORT="${EVERYNODE_HEALTH_PORT:-28080}"
fi
LOGS="$STATE/logs"
# cluster-up.sh writes the kubeconfig here; the caller's KUBECONFIG is never
# overwritten, so a real cluster is never touched by these scripts.
export E2E_KUBECONFIG="${E2E_KUBECONFIG:-$STATE/kubeconfig}"
export KUBECONFIG="$E2E_KUBECONFIG"
NAMESPACE="${NAMESPACE:-everynode-system}"
RELEASE="${RELEASE:-everynode}"
# everynode runs on this host, outside the cluster (no container runtime
# here); the API server and kube-scheduler reach it on loopback.
EVERYNODE_URL="https://127.0.0.1:$EVERYNODE_PORT"
EVERYNODE_PID="$STATE/everynode.pid"
EVERYNODE_KUBECONFIG="$STATE/everynode.kubeconfig"
EVERYNODE_LOG="$LOGS/everynode.log"

mkdir -p "$LOGS"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# wait_for DESCRIPTION TIMEOUT_SECONDS COMMAND...: retries COMMAND every
# second, printing a dot every 5 s so long waits are not silent.
wait_for() {
  local what="$1" timeout="$2"; shift 2
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - start >= timeout )); then
      echo; echo "timed out after ${timeout}s waiting for $what" >&2
      return 1
    fi
    (( (SECONDS - start) % 5 == 4 )) && printf '.'
    sleep 1
  done
}

# pki makes a CA and a serving certificate for 127.0.0.1: the webhook
# configurations and the scheduler's extender config trust the CA. Then a
# second CA for client certificates (client_pki).
pki() {
  client_pki
  [[ -f "$PKI/tls.crt" && -f "$PKI/ca.crt" ]] && return
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
      -subj /CN=everynode-e2e-ca -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj /CN=everynode -keyout tls.key -out tls.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >ext.cnf
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
      -extfile ext.cnf -out tls.crt 2>/dev/null
  )
}

# client_pki makes the client CA and the certificates kube-apiserver (as
# webhook client) and kube-scheduler (as extender client) present to
# everynode; everynode checks them when `cluster.sh client-auth on` gave it
# --client-ca-file. Its own CA, so the serving CA signs no client.
client_pki() {
  [[ -f "$PKI/client-ca.crt" && -f "$PKI/scheduler-client.crt" ]] && return
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
      -subj /CN=everynode-e2e-client-ca -keyout client-ca.key -out client-ca.crt 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client-ext.cnf
    local who
    for who in apiserver scheduler; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -subj "/CN=kube-$who" -keyout "$who-client.key" -out "$who-client.csr" 2>/dev/null
      openssl x509 -req -in "$who-client.csr" -CA client-ca.crt -CAkey client-ca.key -CAcreateserial -days 365 \
        -extfile client-ext.cnf -out "$who-client.crt" 2>/dev/null
    done
  )
}

install_chart() {
  say "installing the everynode chart (external mode: webhooks call $EVERYNODE_URL${EXTRA_HELM_ARGS:+; $EXTRA_HELM_ARGS})"
  kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  # shellcheck disable=SC2086
  helm upgrade --install "$RELEASE" "$ROOT/charts/everynode" --namespace "$NAMESPACE" \
    --set external.url="$EVERYNODE_URL" \
    --set tls.caBundle="$(base64 -w0 <"$PKI/ca.crt")" \
    --wait --timeout 2m ${EXTRA_HELM_ARGS:-} >"$LOGS/helm.log"
}
