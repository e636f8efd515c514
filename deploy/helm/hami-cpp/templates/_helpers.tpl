{{/*
Object names follow HAMi's chart: "<fullname>-scheduler", "<fullname>-webhook", ... where
fullname is "hami" for a release called hami (the chart keeps upstream's name for naming, so an
upgrade from HAMi replaces its objects in place).
*/}}
{{- define "hami.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "hami" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hami.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Labels of every object; call with (dict "component" "<name>" "root" $). */}}
{{- define "hami.labels" -}}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: hami-cpp
{{- with .root.Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from global.annotations (nothing when empty). */}}
{{- define "hami.annotations" -}}
{{- with .Values.global.annotations -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* An image reference; call with (dict "image" <values image> "root" $ "default" <tag>). */}}
{{- define "hami.image" -}}
{{- $registry := default .image.registry .root.Values.global.imageRegistry -}}
{{- $tag := .image.tag | default .root.Values.global.imageTag | default .default -}}
{{- if $registry -}}{{ $registry }}/{{- end -}}{{ .image.repository }}:{{ $tag }}
{{- end -}}

{{/* kube-scheduler's image: its own tag, else the cluster's release cut to vMAJOR.MINOR.PATCH
(a distribution's suffix such as "+k3s1", "-eks-<id>" or "-gke.<n>" names no published image).
global.imageTag is hami-cpp's own release and never applies here. Call with (dict "image" <values
image> "root" $). */}}
{{- define "hami.kubeSchedulerImage" -}}
{{- $registry := default .image.registry .root.Values.global.imageRegistry -}}
{{- $tag := .image.tag -}}
{{- if not $tag -}}
{{- $tag = regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .root.Capabilities.KubeVersion.Version -}}
{{- if not (hasPrefix "v" $tag) -}}{{- $tag = printf "v%s" $tag -}}{{- end -}}
{{- end -}}
{{- if $registry -}}{{ $registry }}/{{- end -}}{{ .image.repository }}:{{ $tag }}
{{- end -}}

{{/* The device plugin's and the monitor's nodeSelector: devicePlugin.nvidiaNodeSelector, or
devicePlugin.nvidianodeSelector when a values file of HAMi v2.7 (which spelt it so) gives it. */}}
{{- define "hami.nvidiaNodeSelector" -}}
{{- toYaml (.Values.devicePlugin.nvidianodeSelector | default .Values.devicePlugin.nvidiaNodeSelector) -}}
{{- end -}}

{{/* The monitor's securityContext: devicePlugin.monitor.securityContext with SYS_PTRACE added
unless it is privileged. Without that capability the monitor cannot give containers' processes
their host PIDs and the SM limiter weakens; a context copied from HAMi's chart (SYS_ADMIN
alone) would drop it. Call with the monitor's values. */}}
{{- define "hami.monitorSecurityContext" -}}
{{- $sc := deepCopy (default (dict) .securityContext) -}}
{{- if not $sc.privileged -}}
{{- $caps := default (dict) $sc.capabilities -}}
{{- $add := default (list) $caps.add -}}
{{- if not (has "SYS_PTRACE" $add) -}}{{- $add = append $add "SYS_PTRACE" -}}{{- end -}}
{{- $_ := set $caps "add" $add -}}
{{- $_ := set $sc "capabilities" $caps -}}
{{- end -}}
{{- toYaml $sc -}}
{{- end -}}

{{/* imagePullSecrets of a pod: global ones and the image's own. */}}
{{- define "hami.pullSecrets" -}}
{{- $secrets := concat .root.Values.global.imagePullSecrets .image.pullSecrets -}}
{{- with $secrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Who makes the webhook's serving certificate: "self" (hami-scheduler issues, stores and
renews it, and keeps the webhook's caBundle current), "cert-manager" (a Certificate of the
chart; cert-manager's CA injector fills the caBundle), "user" (you provide the Secret and the
caBundle) or "" (no webhook, no TLS). Certificates from a Secret are mounted and re-read when
they change. */}}
{{- define "hami.scheduler.certSource" -}}
{{- $s := .Values.scheduler -}}
{{- if $s.admissionWebhook.enabled -}}
{{- if $s.certManager.enabled -}}cert-manager
{{- else if $s.patch.enabled -}}self
{{- else -}}user
{{- end -}}
{{- end -}}
{{- end -}}

{{/* extraEnvs (a map) as env entries. */}}
{{- define "hami.extraEnvs" -}}
{{- if kindIs "slice" . }}
{{- /* HAMi's form: a list of EnvVar objects, as they are. */}}
{{- range . }}
- {{- toYaml . | nindent 2 }}
{{- end }}
{{- else }}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}
{{- end -}}
