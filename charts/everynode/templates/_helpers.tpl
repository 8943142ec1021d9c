{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "everynode.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name, the prefix of every resource. Cut at 52 characters so that
"-scheduler" and the other suffixes still fit the 63 of a label value.
*/}}
{{- define "everynode.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "everynode.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "everynode.labels" -}}
helm.sh/chart: {{ include "everynode.chart" . }}
app.kubernetes.io/name: {{ include "everynode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels of the everynode pods. The component label keeps the Service
and the PodDisruptionBudget off the optional scheduler's pods.
*/}}
{{- define "everynode.selectorLabels" -}}
app.kubernetes.io/name: {{ include "everynode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "everynode.scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "everynode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "everynode.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "everynode.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- /*
The identity the controller creates pods as: the only one /validate/pod lets
create daemon pods, and the one whose pods it is not even asked about.
*/}}
{{- define "everynode.controllerUsername" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "everynode.serviceAccountName" . }}
{{- end }}

{{- define "everynode.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "everynode.fullname" .) }}
{{- end }}

{{/* Name of both webhook configurations (they are different kinds). */}}
{{- define "everynode.webhookConfigName" -}}
{{- include "everynode.fullname" . }}
{{- end }}

{{/*
Certificate mode: "self-signed" (default), "cert-manager", "existing-secret",
or "external-ca" (external.url with tls.caBundle: an everynode outside the
cluster serves its own certificate, signed by that CA).
Conflicting settings fail the render with a message instead of picking one.
*/}}
{{- define "everynode.certMode" -}}
{{- if and .Values.certManager.enabled .Values.tls.existingSecret }}
{{- fail "certManager.enabled and tls.existingSecret are mutually exclusive: pick one certificate source" }}
{{- end }}
{{- if and .Values.tls.existingSecret (not .Values.tls.caBundle) }}
{{- fail "tls.existingSecret needs tls.caBundle (base64 PEM of the CA that signed it) for the webhook configurations" }}
{{- end }}
{{- if and .Values.tls.caBundle (not .Values.tls.existingSecret) (not .Values.external.url) }}
{{- fail "tls.caBundle is only used together with tls.existingSecret or external.url" }}
{{- end }}
{{- if and .Values.certManager.issuerRef (not .Values.certManager.enabled) }}
{{- fail "certManager.issuerRef is only used with certManager.enabled=true" }}
{{- end }}
{{- if .Values.certManager.enabled }}cert-manager
{{- else if .Values.tls.existingSecret }}existing-secret
{{- else if .Values.tls.caBundle }}external-ca
{{- else }}self-signed
{{- end }}
{{- end }}

{{/* Secret holding the self-signed CA (self-signed mode; written by everynode). */}}
{{- define "everynode.caSecretName" -}}
{{- printf "%s-ca" (include "everynode.fullname" .) }}
{{- end }}

{{/* cert-manager Certificate for the serving certificate. */}}
{{- define "everynode.servingCertName" -}}
{{- printf "%s-serving" (include "everynode.fullname" .) }}
{{- end }}

{{/* Secret mounted at /tls in the file modes. */}}
{{- define "everynode.tlsSecretName" -}}
{{- if .Values.tls.existingSecret }}
{{- .Values.tls.existingSecret }}
{{- else }}
{{- printf "%s-tls" (include "everynode.fullname" .) }}
{{- end }}
{{- end }}

{{/* DNS names the serving certificate must carry: the Service's. */}}
{{- define "everynode.dnsNames" -}}
{{- $svc := include "everynode.fullname" . }}
{{- printf "%s.%s.svc" $svc .Release.Namespace }},{{ printf "%s.%s.svc.%s" $svc .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/*
Host of external.url, empty without one. With cert-manager the serving
certificate must name it too, or the API server, calling that URL, would
refuse the certificate: as a DNS name, or as an IP address (an IPv4 dotted
quad, or anything with a colon: IPv6).
*/}}
{{- define "everynode.externalHost" -}}
{{- if .Values.external.url }}{{ (urlParse .Values.external.url).hostname }}{{ end }}
{{- end }}
{{- define "everynode.externalHostIsIP" -}}
{{- $h := include "everynode.externalHost" . }}
{{- if and $h (regexMatch "^[0-9.]+$|:" $h) }}true{{ end }}
{{- end }}

{{/* Base URL of the everynode HTTPS server, without a trailing slash. */}}
{{- define "everynode.baseURL" -}}
{{- if .Values.external.url }}
{{- .Values.external.url | trimSuffix "/" }}
{{- else }}
{{- printf "https://%s.%s.svc:443" (include "everynode.fullname" .) .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
Arguments of `everynode serve`, one per line as "--flag=value". The Deployment
renders them as a YAML list; NOTES.txt prints them for an everynode that runs
outside the cluster (external.url), so both always agree.
*/}}
{{- define "everynode.args" -}}
{{- $mode := include "everynode.certMode" . -}}
--secure-addr=:8443
--health-addr=:8080
--namespace={{ .Release.Namespace }}
--leader-elect={{ .Values.leaderElection.enabled }}
--leader-election-id={{ include "everynode.fullname" . }}
--leader-elect-lease-duration={{ .Values.leaderElection.leaseDuration }}
--leader-elect-renew-deadline={{ .Values.leaderElection.renewDeadline }}
--leader-elect-retry-period={{ .Values.leaderElection.retryPeriod }}
--controller-username={{ include "everynode.controllerUsername" . }}
--controller-workers={{ .Values.controller.workers }}
--webhook-skipped-namespaces={{ include "everynode.excludedNamespaces" . | fromJsonArray | join "," }}
--kube-api-qps={{ .Values.kubeAPI.qps }}
--kube-api-burst={{ .Values.kubeAPI.burst }}
{{- if eq $mode "self-signed" }}
--cert-mode=self-signed
--ca-secret-name={{ include "everynode.caSecretName" . }}
--tls-dns-names={{ include "everynode.dnsNames" . }}
--webhook-configurations={{ include "everynode.webhookConfigName" . }},{{ include "everynode.webhookConfigName" . }}
{{- else }}
--cert-mode=file
--tls-cert-file=/tls/tls.crt
--tls-key-file=/tls/tls.key
{{- end }}
{{- if .Values.scheduler.enabled }}
--scheduler-name={{ .Values.scheduler.name }}
{{- end }}
-v={{ .Values.logLevel }}
--http2={{ .Values.http2 }}
{{- with .Values.startupTaint }}
--startup-taint={{ . }}
{{- end }}
--daemon-resource={{ .Values.scheduler.daemonResource }}
{{- if .Values.takeover.enabled }}
--takeover
--takeover-probe-timeout={{ .Values.takeover.probeTimeoutSeconds }}s
--takeover-retry={{ .Values.takeover.retrySeconds }}s
--takeover-lock-policy={{ if .Values.takeover.lockedIdentities }}{{ include "everynode.takeoverLock" . }}{{ end }}
{{- end }}
{{- if and .Values.clientAuth.caBundle (not .Values.external.url) }}
--client-ca-file=/client-ca/ca.crt
{{- end }}
--max-in-flight={{ .Values.maxInFlight }}
--shutdown-delay={{ .Values.shutdown.delaySeconds }}s
--shutdown-drain-timeout={{ .Values.shutdown.drainTimeoutSeconds }}s
{{- end }}

{{/*
terminationGracePeriodSeconds, checked: the kubelet kills the container when
it ends, counting from the start of the preStop hook, so it must leave room
for the preStop sleep, the shutdown delay and the whole drain.
*/}}
{{- define "everynode.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown }}
{{- $need := add $s.preStopSleepSeconds $s.delaySeconds $s.drainTimeoutSeconds }}
{{- if le (int $s.terminationGracePeriodSeconds) (int $need) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + delaySeconds + drainTimeoutSeconds (%d)" (int $s.terminationGracePeriodSeconds) (int $need)) }}
{{- end }}
{{- int $s.terminationGracePeriodSeconds }}
{{- end }}

{{/*
Namespaces no webhook matches. kube-system and kube-node-lease: a cluster must
be able to recover its own components while everynode is down. The release
namespace: everynode's own pods must never wait on everynode.
*/}}
{{- define "everynode.excludedNamespaces" -}}
{{- $ns := list "kube-system" "kube-node-lease" .Release.Namespace }}
{{- $ns = concat $ns .Values.webhooks.excludeNamespaces | uniq }}
{{- toJson $ns }}
{{- end }}

{{- define "everynode.webhookNamespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "everynode.excludedNamespaces" . }}
{{- end }}

{{/*
clientConfig of one webhook. Call with (dict "root" $ "path" "/validate/pod").
*/}}
{{- define "everynode.webhookClientConfig" -}}
{{- $root := .root }}
{{- $mode := include "everynode.certMode" $root -}}
clientConfig:
  {{- if $root.Values.external.url }}
  url: {{ printf "%s%s" (include "everynode.baseURL" $root) .path | quote }}
  {{- else }}
  service:
    name: {{ include "everynode.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ .path | quote }}
    port: 443
  {{- end }}
  {{- if or (eq $mode "existing-secret") (eq $mode "external-ca") }}
  caBundle: {{ $root.Values.tls.caBundle | nospace }}
  {{- end }}
  {{- /* self-signed: everynode patches caBundle; cert-manager: the cainjector does. */}}
{{- end }}

{{/*
Key of the CAs the second scheduler trusts, in the Secret it mounts. Contract
with certs/: in self-signed mode everynode keeps the current, the next and the
previous CA under ca-bundle.crt (certs.BundleKey), so a scheduler that read it
at start trusts the serving certificate after one rotation (kube-scheduler
reads an extender's caFile once); cert-manager writes its CA under ca.crt.
*/}}
{{- define "everynode.caCertKey" -}}
{{- if eq (include "everynode.certMode" .) "self-signed" -}}
ca-bundle.crt
{{- else -}}
ca.crt
{{- end -}}
{{- end }}

{{/*
KubeSchedulerConfiguration of the optional second scheduler. Its own profile
and Lease, so it runs beside the cluster's scheduler without taking over any
pod that does not ask for it by schedulerName.
*/}}
{{- define "everynode.scheduler.config" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceName: {{ .Values.scheduler.name }}
  resourceNamespace: {{ .Release.Namespace }}
profiles:
  - schedulerName: {{ .Values.scheduler.name }}
extenders:
  - urlPrefix: {{ printf "%s/extender" (include "everynode.baseURL" .) }}
    filterVerb: filter
    # No prioritize verb: the extender scores nothing an ordinary pod could
    # use, and a daemon pod is pinned to one node; each verb is one more
    # call, and one more timeout when everynode hangs.
    preemptVerb: preempt
    {{- with .Values.scheduler.daemonResource }}
    # The scheduler calls the extender only for pods that request this
    # resource, which only daemon pods do: a hung everynode costs no one
    # else anything. ignoredByScheduler: no node advertises it.
    managedResources:
      - name: {{ . }}
        ignoredByScheduler: true
    {{- end }}
    # Node names in, node names out: the extender answers from its own cache.
    nodeCacheCapable: true
    # The extender refines, it does not decide: when it is down, pods are
    # still scheduled (the webhook pins daemon pods to their node anyway).
    ignorable: true
    enableHTTPS: true
    tlsConfig:
      {{- if eq (include "everynode.certMode" .) "existing-secret" }}
      # caData takes the same base64 PEM as a webhook's caBundle.
      caData: {{ .Values.tls.caBundle | nospace }}
      {{- else }}
      caFile: /etc/everynode/ca/{{ include "everynode.caCertKey" . }}
      {{- end }}
      {{- if .Values.clientAuth.caBundle }}
      # everynode asks for a client certificate (clientAuth.caBundle).
      certFile: /etc/everynode/client/tls.crt
      keyFile: /etc/everynode/client/tls.key
      {{- end }}
    # The extender answers in milliseconds; this bounds what each call
    # costs while everynode hangs (everynode scheduler-config's default).
    httpTimeout: 1s
{{- end }}

{{/*
The takeover lock's ValidatingAdmissionPolicy, and the binding everynode
makes while it holds the takeover (cluster-scoped: named after the
release).
*/}}
{{- define "everynode.takeoverLock" -}}
{{ include "everynode.fullname" . }}-takeover-lock
{{- end }}
