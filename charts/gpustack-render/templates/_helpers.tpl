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
