{{- define "hbgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hbgw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "hbgw.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "hbgw.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hbgw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "hbgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: call with (dict "ctx" $ "role" "api"). */}}
{{- define "hbgw.selector" -}}
app.kubernetes.io/name: {{ include "hbgw.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "hbgw.secretName" -}}
{{- default (printf "%s-secret" (include "hbgw.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{- define "hbgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hbgw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hbgw.image" -}}
{{- $repository := required "set image.repository to the image you built and pushed (one image serves every role: docker build -t REGISTRY/heartbeat-gateway:TAG . && docker push REGISTRY/heartbeat-gateway:TAG, see the chart README \"The image\"), and image.tag or image.digest" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secret keys that may be absent from the Secret (existingSecret included). */}}
{{- define "hbgw.optionalSecrets" -}}
HBGW_API_TOKENS HBGW_API_ID_KEY HBGW_OPENAI_API_KEY HBGW_ALERT_WEBHOOK HBGW_ALERT_WEBHOOK_SECRET HBGW_SLACK_SIGNING_SECRET HBGW_SLACK_BOT_TOKEN HBGW_TELEGRAM_BOT_TOKEN HBGW_TELEGRAM_SECRET_TOKEN HBGW_DISCORD_BOT_TOKEN HBGW_WEBHOOK_SECRET HBGW_WEBHOOK_URL HBGW_BROKER_URL
{{- end -}}

{{/* The Secret keys each role reads, and no other: Flower never sees the database, the API
     never the model key (the README's table). */}}
{{- define "hbgw.roleSecrets" -}}
{{- $stores := list "HBGW_DATABASE_URL" "HBGW_REDIS_URL" "HBGW_BROKER_URL" -}}
{{- $platforms := list "HBGW_SLACK_SIGNING_SECRET" "HBGW_SLACK_BOT_TOKEN" "HBGW_TELEGRAM_BOT_TOKEN" "HBGW_TELEGRAM_SECRET_TOKEN" "HBGW_DISCORD_BOT_TOKEN" "HBGW_WEBHOOK_SECRET" -}}
migrate: [HBGW_DATABASE_URL]
api: {{ concat $stores (list "HBGW_ADMIN_TOKEN" "HBGW_API_TOKENS" "HBGW_API_ID_KEY") $platforms | toJson }}
beat: {{ concat $stores (list "HBGW_ALERT_WEBHOOK" "HBGW_ALERT_WEBHOOK_SECRET") | toJson }}
worker: {{ concat $stores (list "HBGW_OPENAI_API_KEY" "HBGW_WEBHOOK_URL" "HBGW_API_ID_KEY") $platforms | toJson }}
flower: [HBGW_REDIS_URL, HBGW_BROKER_URL, HBGW_FLOWER_PASSWORD]
{{- end -}}

{{/* The chart's Secret, key by key (templates/secret.yaml; the checksums below). */}}
{{- define "hbgw.secretData" -}}
{{- $s := .Values.secrets -}}
HBGW_DATABASE_URL: {{ .Values.database.url | quote }}
HBGW_REDIS_URL: {{ .Values.redis.url | quote }}
HBGW_BROKER_URL: {{ .Values.broker.url | quote }}
HBGW_ADMIN_TOKEN: {{ $s.adminToken | quote }}
HBGW_API_TOKENS: {{ $s.apiTokens | quote }}
HBGW_API_ID_KEY: {{ $s.apiIdKey | quote }}
HBGW_OPENAI_API_KEY: {{ $s.openaiApiKey | quote }}
HBGW_FLOWER_PASSWORD: {{ $s.flowerPassword | quote }}
HBGW_ALERT_WEBHOOK: {{ $s.alertWebhook | quote }}
HBGW_ALERT_WEBHOOK_SECRET: {{ $s.alertWebhookSecret | quote }}
HBGW_SLACK_SIGNING_SECRET: {{ $s.slackSigningSecret | quote }}
HBGW_SLACK_BOT_TOKEN: {{ $s.slackBotToken | quote }}
HBGW_TELEGRAM_BOT_TOKEN: {{ $s.telegramBotToken | quote }}
HBGW_TELEGRAM_SECRET_TOKEN: {{ $s.telegramSecretToken | quote }}
HBGW_DISCORD_BOT_TOKEN: {{ $s.discordBotToken | quote }}
HBGW_WEBHOOK_SECRET: {{ $s.webhookSecret | quote }}
HBGW_WEBHOOK_URL: {{ $s.webhookUrl | quote }}
{{- end -}}

{{/* The ConfigMap's data (templates/configmap.yaml; the migration Job's env). */}}
{{- define "hbgw.configData" -}}
HBGW_HOME: /var/lib/hbgw
HBGW_METRICS_PORT: {{ .Values.metricsPort | quote }}
# Probes and Prometheus reach /metrics from outside the pod.
HBGW_METRICS_HOST: "0.0.0.0"
HBGW_API_PORT: {{ .Values.api.port | quote }}
{{- range $key, $value := .Values.config }}
{{ $key }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* Pod annotations of one role: call with (dict "ctx" $ "role" "api"). A checksum of the
     ConfigMap and of the role's own Secret keys, so `helm upgrade` rolls the pods when a
     setting or one of their secrets changes (not when another role's does). An existingSecret
     is not seen by the chart: after rotating it, `kubectl rollout restart`. */}}
{{- define "hbgw.podAnnotations" -}}
checksum/config: {{ include "hbgw.configData" .ctx | sha256sum }}
{{- if not .ctx.Values.existingSecret }}
{{- $all := include "hbgw.secretData" .ctx | fromYaml }}
{{- $mine := dict }}
{{- range (get (include "hbgw.roleSecrets" .ctx | fromYaml) .role) }}
{{- $_ := set $mine . (get $all .) }}
{{- end }}
checksum/secret: {{ toJson $mine | sha256sum }}
{{- end }}
{{- end -}}

{{/* The ConfigMap, then the Secret keys of one role only: call with
     (dict "ctx" $ "role" "api"). */}}
{{- define "hbgw.env" -}}
{{- $optional := splitList " " (include "hbgw.optionalSecrets" .ctx) }}
{{- $secrets := get (include "hbgw.roleSecrets" .ctx | fromYaml) .role }}
envFrom:
  - configMapRef:
      name: {{ include "hbgw.fullname" .ctx }}-config
env:
{{- range $secrets }}
  - name: {{ . }}
    valueFrom:
      secretKeyRef: {name: {{ include "hbgw.secretName" $.ctx }}, key: {{ . }}{{ if has . $optional }}, optional: true{{ end }}}
{{- end }}
{{- if has "HBGW_REDIS_URL" $secrets }}
{{- include "hbgw.redisTlsEnv" .ctx | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod-level fields shared by every role: call with (dict "ctx" $ "redis" true|false);
     "redis": the role talks to Redis, so it mounts redis.tls.existingSecret when one is set. */}}
{{- define "hbgw.podSpec" -}}
{{- $v := .ctx.Values -}}
{{- if and .serviceAccount .ctx.Values.serviceAccount.create }}
serviceAccountName: {{ .serviceAccount }}
{{- else }}
serviceAccountName: {{ include "hbgw.serviceAccountName" .ctx }}
{{- end }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  # The root filesystem is read-only; HBGW_HOME and /tmp are the only writable paths.
  - name: home
    emptyDir: {sizeLimit: 256Mi}
  - name: tmp
    emptyDir: {sizeLimit: 64Mi}
{{- if and .redis $v.redis.tls.existingSecret }}
  # ca.crt (and tls.crt, tls.key for a client certificate): HBGW_REDIS_TLS_* point here.
  - name: redis-tls
    secret: {secretName: {{ $v.redis.tls.existingSecret | quote }}, defaultMode: 0440}
{{- end }}
{{- end -}}

{{/* Container-level fields shared by every role: call with (dict "ctx" $ "redis" true|false). */}}
{{- define "hbgw.container" -}}
{{- $v := .ctx.Values -}}
image: {{ include "hbgw.image" .ctx }}
imagePullPolicy: {{ $v.image.pullPolicy }}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
volumeMounts:
  - {name: home, mountPath: /var/lib/hbgw}
  - {name: tmp, mountPath: /tmp}
{{- if and .redis $v.redis.tls.existingSecret }}
  - {name: redis-tls, mountPath: /etc/hbgw/redis-tls, readOnly: true}
{{- end }}
{{- end -}}

{{/* HBGW_REDIS_TLS_* for a role that mounts redis.tls.existingSecret. */}}
{{- define "hbgw.redisTlsEnv" -}}
{{- with .Values.redis.tls }}
{{- if .existingSecret }}
- {name: HBGW_REDIS_TLS_CA, value: /etc/hbgw/redis-tls/ca.crt}
{{- if .clientCertificate }}
- {name: HBGW_REDIS_TLS_CERT, value: /etc/hbgw/redis-tls/tls.crt}
- {name: HBGW_REDIS_TLS_KEY, value: /etc/hbgw/redis-tls/tls.key}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A probe on the /metrics endpoint of beat and workers (they serve no other HTTP). */}}
{{- define "hbgw.metricsProbes" -}}
livenessProbe:
  httpGet: {path: /metrics, port: metrics}
  initialDelaySeconds: 15
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /metrics, port: metrics}
  periodSeconds: 10
  timeoutSeconds: 5
{{- end -}}
