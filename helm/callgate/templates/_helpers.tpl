{{/* Names and labels. */}}
{{- define "callgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "callgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "callgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "callgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: pass (dict "root" $ "component" "gateway"). */}}
{{- define "callgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "callgate.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "callgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "callgate.secretName" -}}
{{- default (printf "%s-secrets" (include "callgate.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/*
The configuration document the processes load. Two changes to .Values.config, mirrored by
test/unit/ops/chart-config.test.ts: sip.driver follows drachtio.enabled (with the sidecar's
address), and with the sandbox Deployment the embedded sandbox is off, sandbox.url names the
Deployment's Service (the workers' SMS sink) and sandbox providers without a baseUrl point at it.
*/}}
{{- define "callgate.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $sip := get $config "sip" | default dict -}}
{{- if .Values.drachtio.enabled -}}
{{- $_ := set $sip "driver" "drachtio" -}}
{{- $_ := set $sip "drachtio" (dict "host" "127.0.0.1" "port" (int .Values.drachtio.adminPort) "secretEnv" "DRACHTIO_SECRET") -}}
{{- else -}}
{{- $_ := set $sip "driver" "builtin" -}}
{{- end -}}
{{- $_ := set $config "sip" $sip -}}
{{- $sandbox := get $config "sandbox" | default dict -}}
{{- $_ := set $sandbox "enabled" false -}}
{{- $sandboxUrl := printf "http://%s-sandbox:%d" (include "callgate.fullname" .) (int .Values.sandbox.port) -}}
{{- if .Values.sandbox.enabled -}}
{{- $_ := set $sandbox "url" $sandboxUrl -}}
{{- end -}}
{{- $_ := set $config "sandbox" $sandbox -}}
{{- range $name, $provider := (get $config "providers" | default dict) -}}
{{- if and (eq $provider.type "sandbox") (not $provider.baseUrl) -}}
{{- if not $.Values.sandbox.enabled -}}
{{- fail (printf "config.providers.%s is a sandbox provider without baseUrl: enable sandbox or give a baseUrl" $name) -}}
{{- end -}}
{{- $_ := set $provider "baseUrl" $sandboxUrl -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
terminationGracePeriodSeconds: above the preStop wait, the drain time and the longest action
deadline, plus 10 s for the process to exit. Pass (dict "root" $ "role" .Values.worker).
*/}}
{{- define "callgate.terminationGracePeriodSeconds" -}}
{{- if gt (int .role.terminationGracePeriodSeconds) 0 -}}
{{- .role.terminationGracePeriodSeconds -}}
{{- else -}}
{{- $longest := 60000 -}}
{{- range .root.Values.config.tenants -}}
{{- range $name, $action := (.actions | default dict) -}}
{{- $deadline := int ($action.deadlineMs | default 60000) -}}
{{- if gt $deadline $longest -}}{{- $longest = $deadline -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $drain := int (.root.Values.config.gateway.drainMs | default 10000) -}}
{{- add (int .role.preStopSeconds) (div (add $longest $drain 999) 1000) 10 -}}
{{- end -}}
{{- end -}}

{{/* REDIS_URL (and the password it is built from, with the dependency chart). */}}
{{- define "callgate.redisEnv" -}}
{{- if .Values.redis.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Release.Name }}-redis
      key: redis-password
- name: REDIS_URL
  value: "redis://:$(REDIS_PASSWORD)@{{ .Release.Name }}-redis-master:6379/0"
{{- else if .Values.externalRedis.existingSecret }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalRedis.existingSecret }}
      key: {{ .Values.externalRedis.existingSecretKey }}
{{- else if .Values.externalRedis.url }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "callgate.secretName" . }}
      key: REDIS_URL
{{- else }}
{{- fail "Redis: set externalRedis.url, externalRedis.existingSecret or redis.enabled (a pod must never start its own Redis)" }}
{{- end }}
{{- end -}}

{{/* The environment gateway and worker containers share. */}}
{{- define "callgate.commonEnv" -}}
- name: CALLGATE_CONFIG
  value: /etc/callgate/callgate.yaml
{{ include "callgate.redisEnv" . }}
{{- end -}}
