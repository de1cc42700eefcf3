{{- define "eni-ipam.name" -}}eni-ipam{{- end -}}

{{- define "eni-ipam.fullname" -}}
{{- if contains "eni-ipam" .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-eni-ipam" .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "eni-ipam.labels" -}}
app.kubernetes.io/name: eni-ipam
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "eni-ipam.selector" -}}
app.kubernetes.io/name: eni-ipam
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eni-ipam.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "eni-ipam.required" -}}
{{- $_ := required "region is required: the Alibaba Cloud region of the cluster, e.g. --set region=cn-hangzhou" .Values.region -}}
{{- $_ := required "vpcId is required: the cluster's VPC, e.g. --set vpcId=vpc-bp1xxxx" .Values.vpcId -}}
{{- $_ := required "clusterId is required: a name that tags the ENIs this cluster creates, e.g. --set clusterId=prod-1" .Values.clusterId -}}
{{- if eq .Values.credentials.mode "secret" -}}
{{- $_ := required "credentials.secret.name is required with credentials.mode=secret: an existing Secret holding the AccessKey" .Values.credentials.secret.name -}}
{{- else if eq .Values.credentials.mode "ramRole" -}}
{{- $_ := required "credentials.ramRole.name is required with credentials.mode=ramRole: the RAM role attached to the nodes" .Values.credentials.ramRole.name -}}
{{- else if eq .Values.credentials.mode "rrsa" -}}
{{- $_ := required "credentials.rrsa.roleArn is required with credentials.mode=rrsa" .Values.credentials.rrsa.roleArn -}}
{{- $_ := required "credentials.rrsa.oidcProviderArn is required with credentials.mode=rrsa" .Values.credentials.rrsa.oidcProviderArn -}}
{{- end -}}
{{- end -}}
