{{/* Names and labels shared by every object of the chart. */}}
{{- define "replicator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "replicator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "replicator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "replicator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: engine
{{- end }}

{{- define "replicator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "replicator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "replicator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "replicator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The configuration as mounted: the user's `config`, with `metrics.port` appended when it
sets none. A different top-level value, or one per flow, is refused: the probes and the
Service use .Values.metrics.port.
*/}}
{{- define "replicator.config" -}}
{{- $config := required "config: set the mm2.properties text (--set-file config=mm2.properties)" .Values.config }}
{{- $port := int .Values.metrics.port }}
{{- $flowPort := regexFind "(?m)^[ \\t]*[^#!\\s=:]+->[^#!\\s=:]+\\.metrics\\.port[ \\t]*[=:]" $config }}
{{- if $flowPort }}
{{- fail (printf "config: %q sets metrics.port per flow; this chart serves one metrics port per pod: set a top-level `metrics.port = %d` (values metrics.port) instead" (trim $flowPort) $port) }}
{{- end }}
{{- $line := regexFind "(?m)^[ \\t]*metrics\\.port[ \\t]*[=:][^\\n]*" $config }}
{{- if $line }}
{{- $given := regexReplaceAll "^[ \\t]*metrics\\.port[ \\t]*[=:][ \\t]*" $line "" | trim }}
{{- if ne $given (toString $port) }}
{{- fail (printf "config: metrics.port = %s but values metrics.port is %d; the probes and the metrics Service use metrics.port: make them equal" $given $port) }}
{{- end }}
{{- $config }}
{{- else }}
{{- printf "%s\n# Added by the Helm chart (values metrics.port): the probes and the metrics Service use it.\nmetrics.port = %d\n" (trimSuffix "\n" $config) $port }}
{{- end }}
{{- end }}

{{- define "replicator.probeTiming" -}}
initialDelaySeconds: {{ int .initialDelaySeconds }}
periodSeconds: {{ int .periodSeconds }}
timeoutSeconds: {{ int .timeoutSeconds }}
failureThreshold: {{ int .failureThreshold }}
{{- end }}

{{/*
The verification server's name (its Deployment, Service, NetworkPolicy and ConfigMap)
and labels: the chart's, with component `verification` instead of the workers' `engine`,
so that the workers' Service, PodDisruptionBudget and NetworkPolicy leave its pod out.
*/}}
{{- define "replicator.verificationName" -}}
{{- printf "%s-verification" (include "replicator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "replicator.verificationSelectorLabels" -}}
{{- include "replicator.selectorLabels" . | replace "app.kubernetes.io/component: engine" "app.kubernetes.io/component: verification" }}
{{- end }}

{{- define "replicator.verificationLabels" -}}
{{- include "replicator.labels" . | replace "app.kubernetes.io/component: engine" "app.kubernetes.io/component: verification" }}
{{- end }}

{{/*
The workers' egress rules of networkPolicy: the Kafka clusters, `egress.extra`, DNS. The
verification server reads the same clusters: its policy has the same rules.
*/}}
{{- define "replicator.egressRules" -}}
{{- range .Values.networkPolicy.egress.clusters }}
- to:
    - ipBlock:
        cidr: {{ .cidr }}
  ports:
    {{- range .ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end }}
{{- with .Values.networkPolicy.egress.extra }}
{{ toYaml . }}
{{- end }}
{{- if .Values.networkPolicy.egress.dns }}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}
{{- end }}
