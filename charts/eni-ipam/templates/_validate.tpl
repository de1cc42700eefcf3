{{- /*
What values.schema.json cannot say, checked before anything is installed: `fail` while the
templates render stops `helm install` before it creates an object or a release (only the CRDs
of crds/, which Helm applies before it reads the values, may be there already). Each message
names the value and the fix.
*/ -}}

{{- /* A memory quantity (512Mi, 1Gi, 500M, a number of bytes) in MiB; [name, quantity]. */ -}}
{{- define "eni-ipam.mebibytes" -}}
{{- $name := index . 0 -}}
{{- $q := index . 1 -}}
{{- if or (kindIs "float64" $q) (kindIs "int64" $q) (kindIs "int" $q) -}}
{{- divf (float64 $q) 1048576.0 -}}
{{- else -}}
{{- $s := toString $q -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $s -}}
{{- $unit := trimPrefix $num $s -}}
{{- $mib := dict "" 0.00000095367431640625 "Ki" 0.0009765625 "Mi" 1.0 "Gi" 1024.0 "Ti" 1048576.0 "k" 0.0009765625 "M" 0.95367431640625 "G" 953.67431640625 "T" 953674.31640625 -}}
{{- if or (not $num) (not (hasKey $mib $unit)) -}}
{{- fail (printf "%s: %q is not a memory quantity: write it like 512Mi or 1Gi" $name $s) -}}
{{- end -}}
{{- mulf (float64 $num) (get $mib $unit) -}}
{{- end -}}
{{- end -}}

{{- /* A CPU quantity (100m, 0.5, 2) in millicores; [name, quantity]. */ -}}
{{- define "eni-ipam.millicores" -}}
{{- $name := index . 0 -}}
{{- $q := index . 1 -}}
{{- if or (kindIs "float64" $q) (kindIs "int64" $q) (kindIs "int" $q) -}}
{{- mulf (float64 $q) 1000.0 -}}
{{- else -}}
{{- $s := toString $q -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $s -}}
{{- $unit := trimPrefix $num $s -}}
{{- if or (not $num) (not (has $unit (list "" "m"))) -}}
{{- fail (printf "%s: %q is not a CPU quantity: write it like 100m or 0.5" $name $s) -}}
{{- end -}}
{{- mulf (float64 $num) (ternary 1.0 1000.0 (eq $unit "m")) -}}
{{- end -}}
{{- end -}}

{{- /* Requests above limits, and a V8 heap that does not fit the memory limit; [component, values]. */ -}}
{{- define "eni-ipam.validateResources" -}}
{{- $c := index . 0 -}}
{{- $v := index . 1 -}}
{{- $req := $v.resources.requests | default dict -}}
{{- $lim := $v.resources.limits | default dict -}}
{{- range $res, $unit := dict "memory" "eni-ipam.mebibytes" "cpu" "eni-ipam.millicores" -}}
{{- if and (hasKey $req $res) (hasKey $lim $res) -}}
{{- $r := float64 (include $unit (list (printf "%s.resources.requests.%s" $c $res) (get $req $res))) -}}
{{- $l := float64 (include $unit (list (printf "%s.resources.limits.%s" $c $res) (get $lim $res))) -}}
{{- if gt $r $l -}}
{{- fail (printf "%s.resources.requests.%s (%v) is above %s.resources.limits.%s (%v): the API server would refuse the pods; lower the request or raise the limit" $c $res (get $req $res) $c $res (get $lim $res)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if hasKey $lim "memory" -}}
{{- $limit := float64 (include "eni-ipam.mebibytes" (list (printf "%s.resources.limits.memory" $c) $lim.memory)) -}}
{{- if ge (float64 $v.maxHeapMiB) $limit -}}
{{- fail (printf "%s.maxHeapMiB (%v) is not below %s.resources.limits.memory (%v = %.0f MiB): the container would be killed before V8 collects its heap; set maxHeapMiB to about 3/4 of the limit, or raise the limit" $c $v.maxHeapMiB $c $lim.memory $limit) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "eni-ipam.validate" -}}
{{- $o := .Values.operator -}}
{{- $a := .Values.agent -}}
{{- /* One port per endpoint. */ -}}
{{- range $c, $v := dict "operator" $o "agent" $a -}}
{{- if eq (int $v.metricsPort) (int $v.healthPort) -}}
{{- fail (printf "%s.metricsPort and %s.healthPort are both %v: /metrics and the health checks are served on two ports; set one of them to another port" $c $c $v.metricsPort) -}}
{{- end -}}
{{- end -}}
{{- /* Both in the host network, an operator and an agent share a node's ports. */ -}}
{{- if $o.hostNetwork -}}
{{- range $op := list "metricsPort" "healthPort" -}}
{{- range $ap := list "metricsPort" "healthPort" -}}
{{- if eq (int (get $o $op)) (int (get $a $ap)) -}}
{{- fail (printf "operator.%s and agent.%s are both %v: both run in the host network and an operator shares a node with an agent; set one of them to another port" $op $ap (get $o $op)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "eni-ipam.validateResources" (list "operator" $o) -}}
{{- include "eni-ipam.validateResources" (list "agent" $a) -}}
{{- /* Leader election, as the operator checks it when it starts (it would crash-loop). */ -}}
{{- $le := $o.leaderElection -}}
{{- if $le.enabled -}}
{{- if or (le (float64 $le.leaseDurationSeconds) (float64 $le.renewDeadlineSeconds)) (le (float64 $le.renewDeadlineSeconds) (mulf 1.2 $le.retryPeriodSeconds)) -}}
{{- fail (printf "operator.leaderElection: leaseDurationSeconds (%v) must be longer than renewDeadlineSeconds (%v), and renewDeadlineSeconds longer than 1.2 x retryPeriodSeconds (%v); the defaults are 15, 10 and 2" $le.leaseDurationSeconds $le.renewDeadlineSeconds $le.retryPeriodSeconds) -}}
{{- end -}}
{{- else if gt (int $o.replicas) 1 -}}
{{- fail (printf "operator.replicas is %v with operator.leaderElection.enabled=false: every replica would change the cloud at once; set operator.replicas=1 or enable leader election" $o.replicas) -}}
{{- end -}}
{{- /* A rolling update that can make no progress is refused by the API server. */ -}}
{{- if eq $o.updateStrategy.type "RollingUpdate" -}}
{{- $ru := $o.updateStrategy.rollingUpdate | default dict -}}
{{- if and (hasKey $ru "maxSurge") (hasKey $ru "maxUnavailable") (has (toString $ru.maxSurge) (list "0" "0%")) (has (toString $ru.maxUnavailable) (list "0" "0%")) -}}
{{- fail "operator.updateStrategy.rollingUpdate: maxSurge and maxUnavailable are both 0, so no pod could ever be replaced; set maxUnavailable to 1" -}}
{{- end -}}
{{- end -}}
{{- if and $a.exclusiveENIs (not $a.nodeRouting) -}}
{{- fail "agent.exclusiveENIs=true needs agent.nodeRouting=true: moving an ENI into a pod is part of the node's datapath" -}}
{{- end -}}
{{- if and .Values.defaultClass.create (eq (toString (dig "eniMode" "Shared" (.Values.defaultClass.spec | default dict))) "Exclusive") (not $a.exclusiveENIs) -}}
{{- fail "defaultClass.spec.eniMode is Exclusive but agent.exclusiveENIs is false: the agents could not move ENIs into pods; set agent.exclusiveENIs=true" -}}
{{- end -}}
{{- /* The ENIPoolClass CRD's CEL rule, which JSON schema cannot write. */ -}}
{{- if .Values.defaultClass.create -}}
{{- $spec := .Values.defaultClass.spec | default dict -}}
{{- if and (hasKey $spec "minAllocate") (hasKey $spec "maxAllocate") (ne (int $spec.maxAllocate) 0) (gt (int $spec.minAllocate) (int $spec.maxAllocate)) -}}
{{- fail (printf "defaultClass.spec.minAllocate (%v) is above defaultClass.spec.maxAllocate (%v): minAllocate must not exceed maxAllocate (0 means the instance type's limit); lower minAllocate or raise maxAllocate" $spec.minAllocate $spec.maxAllocate) -}}
{{- end -}}
{{- end -}}
{{- end -}}
