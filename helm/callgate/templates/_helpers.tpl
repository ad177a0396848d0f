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
The configuration document the processes load. Four changes to .Values.config, mirrored by
test/unit/ops/chart-render.ts: sip.driver follows drachtio.enabled (with the sidecar's
address); sip.tls.enabled lists tls in sip.transports and names the mounted files (below); with the sandbox Deployment the embedded sandbox is off, sandbox.url names the
Deployment's Service (the workers' SMS sink) and sandbox providers without a baseUrl point at it;
http.operator listens on the pod's address with operatorTokens, on its loopback without any.
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
{{- include "callgate.sipTlsConfig" (dict "root" . "sip" $sip) -}}
{{- $_ := set $config "sip" $sip -}}
{{- $sandbox := get $config "sandbox" | default dict -}}
{{- $_ := set $sandbox "enabled" false -}}
{{- $sandboxUrl := printf "http://%s-sandbox:%d" (include "callgate.fullname" .) (int .Values.sandbox.port) -}}
{{- if .Values.sandbox.enabled -}}
{{- $_ := set $sandbox "url" $sandboxUrl -}}
{{- end -}}
{{- $_ := set $config "sandbox" $sandbox -}}
{{- $http := get $config "http" | default dict -}}
{{- $tokens := list -}}
{{- range .Values.operatorTokens -}}
{{- $tokens = append $tokens (dict "name" .name "tokenEnv" (include "callgate.tokenEnv" .name) "scopes" .scopes) -}}
{{- end -}}
{{- $operator := dict "listen" (ternary "0.0.0.0" "127.0.0.1" (gt (len $tokens) 0)) "port" (int .Values.operator.port) -}}
{{- if $tokens -}}
{{- $_ := set $operator "tokens" $tokens -}}
{{- end -}}
{{- $_ := set $http "operator" $operator -}}
{{- $_ := set $config "http" $http -}}
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

{{/* CALLGATE_TOKEN_<NAME>: the variable holding an operator token, from its name. */}}
{{- define "callgate.tokenEnv" -}}
{{- printf "CALLGATE_TOKEN_%s" (. | upper | replace "-" "_") -}}
{{- end -}}

{{/* Operator tokens kept in a Secret of their own (existingSecret and key). */}}
{{- define "callgate.operatorTokenEnv" -}}
{{- range $i, $token := .Values.operatorTokens | default list }}
{{- if $token.existingSecret }}
- name: {{ include "callgate.tokenEnv" $token.name }}
  valueFrom:
    secretKeyRef:
      name: {{ $token.existingSecret }}
      key: {{ required (printf "operatorTokens[%d].key: the key of %s holding the token" $i $token.existingSecret) $token.key }}
{{- else if and (not $token.value) (not $.Values.secrets.existingSecret) }}
{{- fail (printf "operatorTokens[%d] (%s) needs value, or existingSecret and key" $i $token.name) }}
{{- else if and $token.value $.Values.secrets.existingSecret }}
{{- fail (printf "operatorTokens[%d] (%s): with secrets.existingSecret, keep the token there as %s (or give existingSecret and key), not in value" $i $token.name (include "callgate.tokenEnv" $token.name)) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod's securityContext: a fixed non-root user and RuntimeDefault seccomp. */}}
{{- define "callgate.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{/*
A container's securityContext: read-only root, no capabilities, no privilege escalation. Pass
(dict "root" $ "sysNice" true) for the gateway with gateway.sysNice: uid 0 with SYS_NICE only.
*/}}
{{- define "callgate.securityContext" -}}
{{- $context := deepCopy .root.Values.securityContext -}}
{{- if .sysNice -}}
{{- $_ := set $context "runAsNonRoot" false -}}
{{- $_ := set $context "runAsUser" 0 -}}
{{- $_ := set $context "capabilities" (dict "drop" (list "ALL") "add" (list "SYS_NICE")) -}}
{{- end -}}
{{- toYaml (mergeOverwrite $context (.override | default dict)) -}}
{{- end -}}

{{/*
SIP sources as NetworkPolicy ipBlock CIDRs: every tenant's trunk.allowFrom, media.allowFrom and
networkPolicy.extraSipFrom; "any" when a tenant lets anyone call (open, or digest only).
*/}}
{{- define "callgate.sipSources" -}}
{{- $cidrs := list -}}
{{- $any := false -}}
{{- range .Values.config.tenants -}}
{{- $trunk := .trunk | default dict -}}
{{- if $trunk.allowFrom -}}
{{- range $trunk.allowFrom -}}
{{- $cidrs = append $cidrs (include "callgate.cidr" .) -}}
{{- end -}}
{{- else -}}
{{- $any = true -}}
{{- end -}}
{{- $media := .media | default dict -}}
{{- range ($media.allowFrom | default list) -}}
{{- $cidrs = append $cidrs (include "callgate.cidr" .) -}}
{{- end -}}
{{- end -}}
{{- range .Values.networkPolicy.extraSipFrom -}}
{{- $cidrs = append $cidrs (include "callgate.cidr" .) -}}
{{- end -}}
{{- if $any -}}any{{- else -}}{{- $cidrs | uniq | join "," -}}{{- end -}}
{{- end -}}

{{/* An address or CIDR as a CIDR (a bare address is one host). */}}
{{- define "callgate.cidr" -}}
{{- if contains "/" . -}}{{- . -}}{{- else if contains ":" . -}}{{- printf "%s/128" . -}}{{- else -}}{{- printf "%s/32" . -}}{{- end -}}
{{- end -}}


{{/*
SIP over TLS (sip.tls in values; test/unit/ops/chart-tls.test.ts). The kubernetes.io/tls Secret is
mounted whole at callgate.tlsDir, never by subPath: kubelet swaps a renewed Secret's files in
place and the gateway polls them (config.sip.tls.reloadIntervalMs), so a new certificate needs no
restart. Each of sip.tls.trunkCAs is mounted at callgate.trunkCaDir/<name>.
*/}}
{{- define "callgate.tlsDir" -}}/etc/callgate-tls{{- end -}}
{{- define "callgate.trunkCaDir" -}}/etc/callgate-trunk-ca{{- end -}}

{{/* The SIP over TLS port: config.sip.tlsPort, 5061 unless set. */}}
{{- define "callgate.sipTlsPort" -}}
{{- .Values.config.sip.tlsPort | default 5061 | int -}}
{{- end -}}

{{/*
config.sip with sip.tls: tls added to transports and certFile, keyFile (and caFile with
sip.tls.useSecretCa) set to the mounted Secret's files, over the rest of config.sip.tls. Pass
(dict "root" $ "sip" $sip); $sip is changed in place. Without sip.tls.enabled a config that lists
tls fails the install: its certificate would not be there.
*/}}
{{- define "callgate.sipTlsConfig" -}}
{{- $tls := .root.Values.sip.tls -}}
{{- $transports := get .sip "transports" | default (list "udp" "tcp") -}}
{{- if $tls.enabled -}}
{{- if .root.Values.drachtio.enabled -}}
{{- fail "sip.tls.enabled needs the built-in SIP stack: with drachtio.enabled, drachtio-server owns SIP and callgate's TLS listener does not run" -}}
{{- end -}}
{{- if not $tls.secretName -}}
{{- fail "sip.tls.enabled needs sip.tls.secretName: a kubernetes.io/tls Secret with tls.crt and tls.key" -}}
{{- end -}}
{{- if not (has "tls" $transports) -}}
{{- $transports = append $transports "tls" -}}
{{- end -}}
{{- $_ := set .sip "transports" $transports -}}
{{- $dir := include "callgate.tlsDir" .root -}}
{{- $files := get .sip "tls" | default dict -}}
{{- $_ := set $files "certFile" (printf "%s/tls.crt" $dir) -}}
{{- $_ := set $files "keyFile" (printf "%s/tls.key" $dir) -}}
{{- if $tls.useSecretCa -}}
{{- $_ := set $files "caFile" (printf "%s/ca.crt" $dir) -}}
{{- end -}}
{{- $_ := set .sip "tls" $files -}}
{{- include "callgate.trunkCaCheck" .root -}}
{{- else if has "tls" $transports -}}
{{- fail "config.sip.transports lists tls: set sip.tls.enabled and sip.tls.secretName (the certificate Secret the chart mounts)" -}}
{{- end -}}
{{- end -}}

{{/*
A tenant's tls.caFile under callgate.trunkCaDir must name a CA sip.tls.trunkCAs mounts, or the
gateway would stop at load on a missing file.
*/}}
{{- define "callgate.trunkCaCheck" -}}
{{- $dir := printf "%s/" (include "callgate.trunkCaDir" .) -}}
{{- $mounted := list -}}
{{- range .Values.sip.tls.trunkCAs -}}
{{- $mounted = append $mounted (printf "%s%s/%s" $dir .name (.key | default "ca.crt")) -}}
{{- end -}}
{{- $tenants := .Values.config.tenants | default list -}}
{{- range $i, $tenant := $tenants -}}
{{- $caFile := (($tenant.tls | default dict).caFile | default "") -}}
{{- if and (hasPrefix $dir $caFile) (not (has $caFile $mounted)) -}}
{{- fail (printf "config.tenants[%d].tls.caFile (%s) is not a CA sip.tls.trunkCAs mounts: add { name, secretName or configMapName, key } there" $i $caFile) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The volumes of sip.tls: the certificate Secret and each trunk CA (Secret or ConfigMap). */}}
{{- define "callgate.sipTlsVolumes" -}}
{{- $tls := .Values.sip.tls -}}
- name: sip-tls
  secret:
    secretName: {{ $tls.secretName }}
    # Owner and group (fsGroup) only: the key is the gateway's alone.
    defaultMode: 0440
{{- range $tls.trunkCAs }}
- name: trunk-ca-{{ .name }}
  {{- if .secretName }}
  secret:
    secretName: {{ .secretName }}
  {{- else }}
  configMap:
    name: {{ required (printf "sip.tls.trunkCAs %s needs secretName or configMapName" .name) .configMapName }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Where the gateway container sees them, read-only. */}}
{{- define "callgate.sipTlsVolumeMounts" -}}
- name: sip-tls
  mountPath: {{ include "callgate.tlsDir" . }}
  readOnly: true
{{- range .Values.sip.tls.trunkCAs }}
- name: trunk-ca-{{ .name }}
  mountPath: {{ include "callgate.trunkCaDir" $ }}/{{ .name }}
  readOnly: true
{{- end }}
{{- end -}}
