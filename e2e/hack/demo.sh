#!/usr/bin/env bash
# demo.sh: the newcomer's tour of everynode. On a local cluster (built and
# started here) unless KUBECONFIG names a cluster that already runs everynode:
# apply the upstream docs' DaemonSet with only its apiVersion changed, see one
# pod per node, add a node and see its pod arrive, roll a new image and watch
# the rollout, then look at the history.
set -euo pipefail
given_kubeconfig="${KUBECONFIG:-}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
NODES="${NODES:-3}"
export PATH="$ROOT/bin:$PATH" # kubectl-everynode, so `kubectl everynode` works

if [[ -n "$given_kubeconfig" ]]; then
  export KUBECONFIG="$given_kubeconfig"
  say "using the cluster of KUBECONFIG=$KUBECONFIG (everynode must be installed there)"
else
  say "1/6 starting a local cluster: real control plane, $NODES kwok nodes, everynode installed by Helm"
  echo "    (the first run compiles the control plane from source: ~20 minutes on 2 cores)"
  NODES="$NODES" "$ROOT/e2e/hack/cluster.sh" up
fi
kubectl get nodes

SET=fluentd-elasticsearch
NS=kube-system
say "2/6 applying examples/fluentd-elasticsearch.yaml: the upstream docs' DaemonSet, only apiVersion changed"
grep -n apiVersion "$ROOT/examples/fluentd-elasticsearch.yaml"
kubectl apply --server-side -f "$ROOT/examples/fluentd-elasticsearch.yaml"
kubectl everynode rollout status "$SET" -n "$NS" --timeout 3m
kubectl get eds -n "$NS"
kubectl get pods -n "$NS" -l name=$SET -o wide

say "3/6 a node joins: its pod follows"
kwokctl --name "$CLUSTER_NAME" scale node --replicas "$((NODES + 1))" >/dev/null 2>&1 || {
  echo "(not a kwokctl cluster: add a node your usual way)"; }
kubectl wait --for=condition=Ready node --all --timeout=2m >/dev/null
kubectl everynode rollout status "$SET" -n "$NS" --timeout 3m
kubectl get pods -n "$NS" -l name=$SET -o wide

say "4/6 rolling a new image (maxUnavailable 1, the apps/v1 default)"
kubectl patch eds "$SET" -n "$NS" --type json \
  -p '[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"quay.io/fluentd_elasticsearch/fluentd:v5.0.2"}]'
# As for Deployments, annotate right after the change: the controller copies
# the set's change-cause onto its current revision (rollout history shows it).
kubectl annotate eds "$SET" -n "$NS" --overwrite kubernetes.io/change-cause="image fluentd:v5.0.2"
kubectl everynode rollout status "$SET" -n "$NS" --timeout 3m
kubectl get pods -n "$NS" -l name=$SET -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image,STATUS:.status.phase

say "5/6 history and rollback"
kubectl everynode rollout history "$SET" -n "$NS"
kubectl everynode rollout undo "$SET" -n "$NS"
kubectl everynode rollout status "$SET" -n "$NS" --timeout 3m
kubectl get eds -n "$NS" -o wide

say "6/6 look around"
cat <<MSG
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:$ROOT/bin:\$PATH
  kubectl get eds -A                      # everynode DaemonSets, like kubectl get ds
  kubectl describe eds $SET -n $NS        # conditions say why a rollout waits
  kubectl get pod -n $NS -l name=$SET -o yaml | grep -A8 affinity   # the node pinning
  kubectl everynode rollout --help        # status, history, undo, restart, pause, resume
  curl -s http://127.0.0.1:$EVERYNODE_HEALTH_PORT/metrics | grep ^everynode_
  tail -f .e2e/logs/everynode.log
  make cluster-down                       # stop it all
MSG
