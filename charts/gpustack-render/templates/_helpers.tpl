{{/*
Labels of every object: the ones deploy/ gives (name, component, part-of) and Helm's own.
Call with (dict "ctx" $ "name" "gpustack-controller" "component" "controller").
*/}}
{{- define "gpustack-render.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: gpustack-render
{{ include "gpustack-render.helmLabels" .ctx }}
{{- end }}

{{- define "gpustack-render.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* Pod selector labels (never Helm's: a selector cannot change on upgrade). */}}
{{- define "gpustack-render.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpustack-render.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{/* The certificate mode, checked once. */}}
{{- define "gpustack-render.certMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if not (has $mode (list "selfManaged" "existingSecret" "certManager")) -}}
{{- fail (printf "certificates.mode must be selfManaged, certManager or existingSecret, not %q" $mode) -}}
{{- end -}}
{{ $mode }}
{{- end }}

{{- define "gpustack-render.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* What `helm install` prints (NOTES.txt); a template so that tests can render it. */}}
{{- define "gpustack-render.notes" -}}
{{- $mode := include "gpustack-render.certMode" . -}}
{{- $ns := .Release.Namespace -}}
gpustack-render {{ include "gpustack-render.image" . }} in namespace {{ $ns }}: the controller
(Deployment gpustack-controller) and the admission webhook server (Deployment gpustack-webhook).

  kubectl -n {{ $ns }} wait --for=condition=Available deployment/gpustack-webhook deployment/gpustack-controller

Until the webhook server answers, the API server refuses every ModelDeployment write and the
creation of every Pod labelled kvcache.gpustack.ai/inject=true (failurePolicy Fail).
{{- if eq $mode "selfManaged" }}

Certificates: the webhook server issues its own into the Secret {{ .Values.certificates.secretName }} and writes
its CA into the caBundle of gpustack-worker-mutation and gpustack-worker-validation.
{{- else if eq $mode "existingSecret" }}

Certificates: the webhook server mounts the kubernetes.io/tls Secret {{ .Values.certificates.secretName }}, which you
create (its Pods wait for it):
  kubectl -n {{ $ns }} create secret tls {{ .Values.certificates.secretName }} --cert=tls.crt --key=tls.key
{{- if not .Values.certificates.existingSecret.caBundle }}
WARNING: certificates.existingSecret.caBundle is empty, so the API server cannot verify the
webhook server and refuses those requests until you patch your CA (base64 PEM) into the
caBundle of both webhooks of gpustack-worker-mutation and of gpustack-worker-validation, or set
certificates.existingSecret.caBundle and upgrade.
{{- end }}
{{- else }}

Certificates: cert-manager issues the Secret {{ .Values.certificates.secretName }} (Certificate gpustack-webhook)
and its CA injector fills the caBundle; both need cert-manager installed.
{{- end }}
{{- if not .Values.crds.install }}

crds.install is false: install the ModelDeployment CRD yourself
(deploy/crds/worker.gpustack.ai_modeldeployments.yaml): the controller and the webhook serve it.
{{- end }}

Kueue: every ClusterQueue that serves ModelDeployments must list the AdmissionCheck
gpustack-model-deployment-joint (docs/operations.md, "Kueue setup").
{{- end }}
