{{- define "gpu-scheduler.name" -}}gpu-scheduler{{- end -}}

{{- define "gpu-scheduler.labels" -}}
app.kubernetes.io/name: gpu-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: gpu-scheduler
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpu-scheduler.selector" -}}
app.kubernetes.io/name: gpu-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* The Lease's name: the Role grants this one only. */}}
{{- define "gpu-scheduler.lease" -}}
{{- $le := .Values.config.leaderElection | default dict -}}
{{- $le.resourceName | default "gpu-scheduler" -}}
{{- end -}}

{{/* The Lease's namespace: the release's unless the config names another.
The leader-election Role and RoleBinding go there. */}}
{{- define "gpu-scheduler.leaseNamespace" -}}
{{- $le := .Values.config.leaderElection | default dict -}}
{{- $le.resourceNamespace | default .Release.Namespace -}}
{{- end -}}

{{/* The configuration file, with leader election filled from the release. */}}
{{- define "gpu-scheduler.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $le := get $cfg "leaderElection" | default dict -}}
{{- $_ := set $le "leaderElect" .Values.leaderElection.enabled -}}
{{- $_ := set $le "resourceName" (include "gpu-scheduler.lease" .) -}}
{{- $_ := set $le "resourceNamespace" (include "gpu-scheduler.leaseNamespace" .) -}}
{{- $_ := set $cfg "leaderElection" $le -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Object names: the release name if it says gpu-scheduler already
(`helm install gpu-scheduler` gives the names of deploy/), else prefixed. */}}
{{- define "gpu-scheduler.fullname" -}}
{{- if contains "gpu-scheduler" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-gpu-scheduler" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
