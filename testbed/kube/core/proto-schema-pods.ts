/**
 * Protobuf definitions of Pods and the workloads that embed a pod template (k8s.io/api core/v1 and
 * apps/v1 field numbers, v1.32), for `kubectl run`-style typed clients and `kubectl create
 * deployment`. Uncommon volume sources and alpha fields are left out on purpose: a body that uses
 * them is refused with a clear error (protobuf.ts) rather than stored without them.
 */
export const POD_PROTO = `
// k8s.io/api/core/v1: containers
message ExecAction { repeated string command = 1; }
message HTTPHeader { optional string name = 1; optional string value = 2; }
message HTTPGetAction { optional string path = 1; optional IntOrString port = 2; optional string host = 3; optional string scheme = 4; repeated HTTPHeader httpHeaders = 5; }
message TCPSocketAction { optional IntOrString port = 1; optional string host = 2; }
message GRPCAction { optional int32 port = 1; optional string service = 2; }
message SleepAction { optional int64 seconds = 1; }
message ProbeHandler { optional ExecAction exec = 1; optional HTTPGetAction httpGet = 2; optional TCPSocketAction tcpSocket = 3; optional GRPCAction grpc = 4; }
message LifecycleHandler { optional ExecAction exec = 1; optional HTTPGetAction httpGet = 2; optional TCPSocketAction tcpSocket = 3; optional SleepAction sleep = 4; }
message Lifecycle { optional LifecycleHandler postStart = 1; optional LifecycleHandler preStop = 2; }
message Probe {
  optional ProbeHandler handler = 1; optional int32 initialDelaySeconds = 2; optional int32 timeoutSeconds = 3; optional int32 periodSeconds = 4;
  optional int32 successThreshold = 5; optional int32 failureThreshold = 6; optional int64 terminationGracePeriodSeconds = 7;
}
message ContainerPort { optional string name = 1; optional int32 hostPort = 2; optional int32 containerPort = 3; optional string protocol = 4; optional string hostIP = 5; }
message ObjectFieldSelector { optional string apiVersion = 1; optional string fieldPath = 2; }
message ResourceFieldSelector { optional string containerName = 1; optional string resource = 2; optional Quantity divisor = 3; }
message ConfigMapKeySelector { optional LocalObjectReference localObjectReference = 1; optional string key = 2; optional bool optional = 3; }
message SecretKeySelector { optional LocalObjectReference localObjectReference = 1; optional string key = 2; optional bool optional = 3; }
message EnvVarSource { optional ObjectFieldSelector fieldRef = 1; optional ResourceFieldSelector resourceFieldRef = 2; optional ConfigMapKeySelector configMapKeyRef = 3; optional SecretKeySelector secretKeyRef = 4; }
message EnvVar { optional string name = 1; optional string value = 2; optional EnvVarSource valueFrom = 3; }
message ConfigMapEnvSource { optional LocalObjectReference localObjectReference = 1; optional bool optional = 2; }
message SecretEnvSource { optional LocalObjectReference localObjectReference = 1; optional bool optional = 2; }
message EnvFromSource { optional string prefix = 1; optional ConfigMapEnvSource configMapRef = 2; optional SecretEnvSource secretRef = 3; }
message ResourceRequirements { map<string, Quantity> limits = 1; map<string, Quantity> requests = 2; }
message VolumeMount { optional string name = 1; optional bool readOnly = 2; optional string mountPath = 3; optional string subPath = 4; optional string mountPropagation = 5; optional string subPathExpr = 6; }
message Capabilities { repeated string add = 1; repeated string drop = 2; }
message SELinuxOptions { optional string user = 1; optional string role = 2; optional string type = 3; optional string level = 4; }
message SeccompProfile { optional string type = 1; optional string localhostProfile = 2; }
message SecurityContext {
  optional Capabilities capabilities = 1; optional bool privileged = 2; optional SELinuxOptions seLinuxOptions = 3; optional int64 runAsUser = 4;
  optional bool runAsNonRoot = 5; optional bool readOnlyRootFilesystem = 6; optional bool allowPrivilegeEscalation = 7; optional int64 runAsGroup = 8;
  optional string procMount = 9; optional SeccompProfile seccompProfile = 11;
}
message Container {
  optional string name = 1; optional string image = 2; repeated string command = 3; repeated string args = 4; optional string workingDir = 5;
  repeated ContainerPort ports = 6; repeated EnvVar env = 7; optional ResourceRequirements resources = 8; repeated VolumeMount volumeMounts = 9;
  optional Probe livenessProbe = 10; optional Probe readinessProbe = 11; optional Lifecycle lifecycle = 12; optional string terminationMessagePath = 13;
  optional string imagePullPolicy = 14; optional SecurityContext securityContext = 15; optional bool stdin = 16; optional bool stdinOnce = 17;
  optional bool tty = 18; repeated EnvFromSource envFrom = 19; optional string terminationMessagePolicy = 20; optional Probe startupProbe = 22;
  optional string restartPolicy = 24;
}

// k8s.io/api/core/v1: volumes
message KeyToPath { optional string key = 1; optional string path = 2; optional int32 mode = 3; }
message HostPathVolumeSource { optional string path = 1; optional string type = 2; }
message EmptyDirVolumeSource { optional string medium = 1; optional Quantity sizeLimit = 2; }
message SecretVolumeSource { optional string secretName = 1; repeated KeyToPath items = 2; optional int32 defaultMode = 3; optional bool optional = 4; }
message ConfigMapVolumeSource { optional LocalObjectReference localObjectReference = 1; repeated KeyToPath items = 2; optional int32 defaultMode = 3; optional bool optional = 4; }
message PersistentVolumeClaimVolumeSource { optional string claimName = 1; optional bool readOnly = 2; }
message DownwardAPIVolumeFile { optional string path = 1; optional ObjectFieldSelector fieldRef = 2; optional ResourceFieldSelector resourceFieldRef = 3; optional int32 mode = 4; }
message DownwardAPIVolumeSource { repeated DownwardAPIVolumeFile items = 1; optional int32 defaultMode = 2; }
message DownwardAPIProjection { repeated DownwardAPIVolumeFile items = 1; }
message SecretProjection { optional LocalObjectReference localObjectReference = 1; repeated KeyToPath items = 2; optional bool optional = 4; }
message ConfigMapProjection { optional LocalObjectReference localObjectReference = 1; repeated KeyToPath items = 2; optional bool optional = 4; }
message ServiceAccountTokenProjection { optional string audience = 1; optional int64 expirationSeconds = 2; optional string path = 3; }
message VolumeProjection { optional SecretProjection secret = 1; optional DownwardAPIProjection downwardAPI = 2; optional ConfigMapProjection configMap = 3; optional ServiceAccountTokenProjection serviceAccountToken = 4; }
message ProjectedVolumeSource { repeated VolumeProjection sources = 1; optional int32 defaultMode = 2; }
message CSIVolumeSource { optional string driver = 1; optional bool readOnly = 2; optional string fsType = 3; map<string, string> volumeAttributes = 4; optional LocalObjectReference nodePublishSecretRef = 5; }
message VolumeSource {
  optional HostPathVolumeSource hostPath = 1; optional EmptyDirVolumeSource emptyDir = 2; optional SecretVolumeSource secret = 6;
  optional PersistentVolumeClaimVolumeSource persistentVolumeClaim = 10; optional DownwardAPIVolumeSource downwardAPI = 16;
  optional ConfigMapVolumeSource configMap = 19; optional ProjectedVolumeSource projected = 26; optional CSIVolumeSource csi = 28;
}
message Volume { optional string name = 1; optional VolumeSource volumeSource = 2; }

// k8s.io/api/core/v1: scheduling
message NodeSelectorRequirement { optional string key = 1; optional string operator = 2; repeated string values = 3; }
message NodeSelectorTerm { repeated NodeSelectorRequirement matchExpressions = 1; repeated NodeSelectorRequirement matchFields = 2; }
message NodeSelector { repeated NodeSelectorTerm nodeSelectorTerms = 1; }
message PreferredSchedulingTerm { optional int32 weight = 1; optional NodeSelectorTerm preference = 2; }
message NodeAffinity { optional NodeSelector requiredDuringSchedulingIgnoredDuringExecution = 1; repeated PreferredSchedulingTerm preferredDuringSchedulingIgnoredDuringExecution = 2; }
message PodAffinityTerm { optional LabelSelector labelSelector = 1; repeated string namespaces = 2; optional string topologyKey = 3; optional LabelSelector namespaceSelector = 4; }
message WeightedPodAffinityTerm { optional int32 weight = 1; optional PodAffinityTerm podAffinityTerm = 2; }
message PodAffinity { repeated PodAffinityTerm requiredDuringSchedulingIgnoredDuringExecution = 1; repeated WeightedPodAffinityTerm preferredDuringSchedulingIgnoredDuringExecution = 2; }
message PodAntiAffinity { repeated PodAffinityTerm requiredDuringSchedulingIgnoredDuringExecution = 1; repeated WeightedPodAffinityTerm preferredDuringSchedulingIgnoredDuringExecution = 2; }
message Affinity { optional NodeAffinity nodeAffinity = 1; optional PodAffinity podAffinity = 2; optional PodAntiAffinity podAntiAffinity = 3; }
message Toleration { optional string key = 1; optional string operator = 2; optional string value = 3; optional string effect = 4; optional int64 tolerationSeconds = 5; }
message TopologySpreadConstraint { optional int32 maxSkew = 1; optional string topologyKey = 2; optional string whenUnsatisfiable = 3; optional LabelSelector labelSelector = 4; }

// k8s.io/api/core/v1: pods
message Sysctl { optional string name = 1; optional string value = 2; }
message PodSecurityContext {
  optional SELinuxOptions seLinuxOptions = 1; optional int64 runAsUser = 2; optional bool runAsNonRoot = 3; repeated int64 supplementalGroups = 4;
  optional int64 fsGroup = 5; optional int64 runAsGroup = 6; repeated Sysctl sysctls = 7; optional string fsGroupChangePolicy = 9;
  optional SeccompProfile seccompProfile = 10;
}
message HostAlias { optional string ip = 1; repeated string hostnames = 2; }
message PodDNSConfigOption { optional string name = 1; optional string value = 2; }
message PodDNSConfig { repeated string nameservers = 1; repeated string searches = 2; repeated PodDNSConfigOption options = 3; }
message PodReadinessGate { optional string conditionType = 1; }
message PodOS { optional string name = 1; }
message PodSchedulingGate { optional string name = 1; }
message PodSpec {
  repeated Volume volumes = 1; repeated Container containers = 2; optional string restartPolicy = 3; optional int64 terminationGracePeriodSeconds = 4;
  optional int64 activeDeadlineSeconds = 5; optional string dnsPolicy = 6; map<string, string> nodeSelector = 7; optional string serviceAccountName = 8;
  optional string serviceAccount = 9; optional string nodeName = 10; optional bool hostNetwork = 11; optional bool hostPID = 12; optional bool hostIPC = 13;
  optional PodSecurityContext securityContext = 14; repeated LocalObjectReference imagePullSecrets = 15; optional string hostname = 16;
  optional string subdomain = 17; optional Affinity affinity = 18; optional string schedulerName = 19; repeated Container initContainers = 20;
  optional bool automountServiceAccountToken = 21; repeated Toleration tolerations = 22; repeated HostAlias hostAliases = 23;
  optional string priorityClassName = 24; optional int32 priority = 25; optional PodDNSConfig dnsConfig = 26; optional bool shareProcessNamespace = 27;
  repeated PodReadinessGate readinessGates = 28; optional string runtimeClassName = 29; optional bool enableServiceLinks = 30;
  optional string preemptionPolicy = 31; map<string, Quantity> overhead = 32; repeated TopologySpreadConstraint topologySpreadConstraints = 33;
  optional bool setHostnameAsFQDN = 35; optional PodOS os = 36; optional bool hostUsers = 37; repeated PodSchedulingGate schedulingGates = 38;
}
message PodCondition { optional string type = 1; optional string status = 2; optional Time lastProbeTime = 3; optional Time lastTransitionTime = 4; optional string reason = 5; optional string message = 6; }
message PodIP { optional string ip = 1; }
message ContainerStateWaiting { optional string reason = 1; optional string message = 2; }
message ContainerStateRunning { optional Time startedAt = 1; }
message ContainerStateTerminated {
  optional int32 exitCode = 1; optional int32 signal = 2; optional string reason = 3; optional string message = 4; optional Time startedAt = 5;
  optional Time finishedAt = 6; optional string containerID = 7;
}
message ContainerState { optional ContainerStateWaiting waiting = 1; optional ContainerStateRunning running = 2; optional ContainerStateTerminated terminated = 3; }
message ContainerStatus {
  optional string name = 1; optional ContainerState state = 2; optional ContainerState lastState = 3; optional bool ready = 4; optional int32 restartCount = 5;
  optional string image = 6; optional string imageID = 7; optional string containerID = 8; optional bool started = 9;
}
message PodStatus {
  optional string phase = 1; repeated PodCondition conditions = 2; optional string message = 3; optional string reason = 4; optional string hostIP = 5;
  optional string podIP = 6; optional Time startTime = 7; repeated ContainerStatus containerStatuses = 8; optional string qosClass = 9;
  repeated ContainerStatus initContainerStatuses = 10; optional string nominatedNodeName = 11; repeated PodIP podIPs = 12;
}
message Pod { optional ObjectMeta metadata = 1; optional PodSpec spec = 2; optional PodStatus status = 3; }
message PodTemplateSpec { optional ObjectMeta metadata = 1; optional PodSpec spec = 2; }

// k8s.io/api/apps/v1
message RollingUpdateDeployment { optional IntOrString maxUnavailable = 1; optional IntOrString maxSurge = 2; }
message DeploymentStrategy { optional string type = 1; optional RollingUpdateDeployment rollingUpdate = 2; }
message DeploymentSpec {
  optional int32 replicas = 1; optional LabelSelector selector = 2; optional PodTemplateSpec template = 3; optional DeploymentStrategy strategy = 4;
  optional int32 minReadySeconds = 5; optional int32 revisionHistoryLimit = 6; optional bool paused = 7; optional int32 progressDeadlineSeconds = 9;
}
message DeploymentCondition { optional string type = 1; optional string status = 2; optional string reason = 4; optional string message = 5; optional Time lastUpdateTime = 6; optional Time lastTransitionTime = 7; }
message DeploymentStatus {
  optional int64 observedGeneration = 1; optional int32 replicas = 2; optional int32 updatedReplicas = 3; optional int32 availableReplicas = 4;
  optional int32 unavailableReplicas = 5; repeated DeploymentCondition conditions = 6; optional int32 readyReplicas = 7; optional int32 collisionCount = 8;
}
message Deployment { optional ObjectMeta metadata = 1; optional DeploymentSpec spec = 2; optional DeploymentStatus status = 3; }
message RollingUpdateDaemonSet { optional IntOrString maxUnavailable = 1; optional IntOrString maxSurge = 2; }
message DaemonSetUpdateStrategy { optional string type = 1; optional RollingUpdateDaemonSet rollingUpdate = 2; }
message DaemonSetSpec { optional LabelSelector selector = 1; optional PodTemplateSpec template = 2; optional DaemonSetUpdateStrategy updateStrategy = 3; optional int32 minReadySeconds = 4; optional int32 revisionHistoryLimit = 6; }
message DaemonSetCondition { optional string type = 1; optional string status = 2; optional Time lastTransitionTime = 3; optional string reason = 4; optional string message = 5; }
message DaemonSetStatus {
  optional int32 currentNumberScheduled = 1; optional int32 numberMisscheduled = 2; optional int32 desiredNumberScheduled = 3; optional int32 numberReady = 4;
  optional int64 observedGeneration = 5; optional int32 updatedNumberScheduled = 6; optional int32 numberAvailable = 7; optional int32 numberUnavailable = 8;
  optional int32 collisionCount = 9; repeated DaemonSetCondition conditions = 10;
}
message DaemonSet { optional ObjectMeta metadata = 1; optional DaemonSetSpec spec = 2; optional DaemonSetStatus status = 3; }

// k8s.io/api/policy/v1
message PodDisruptionBudgetSpec { optional IntOrString minAvailable = 1; optional LabelSelector selector = 2; optional IntOrString maxUnavailable = 3; optional string unhealthyPodEvictionPolicy = 4; }
message PodDisruptionBudgetStatus {
  optional int64 observedGeneration = 1; map<string, Time> disruptedPods = 2; optional int32 disruptionsAllowed = 3; optional int32 currentHealthy = 4;
  optional int32 desiredHealthy = 5; optional int32 expectedPods = 6; repeated Condition conditions = 7;
}
message PodDisruptionBudget { optional ObjectMeta metadata = 1; optional PodDisruptionBudgetSpec spec = 2; optional PodDisruptionBudgetStatus status = 3; }
`;

/** Embedded Go structs whose fields JSON puts in the parent object (`json:",inline"`). */
export const INLINE = new Set(['Probe.handler', 'Volume.volumeSource', '*.localObjectReference']);

/** Pointer fields of these kinds whose zero value means something (see KEEP_ZERO). */
export const POD_KEEP_ZERO = [
  ...[
    'runAsUser',
    'runAsGroup',
    'runAsNonRoot',
    'privileged',
    'readOnlyRootFilesystem',
    'allowPrivilegeEscalation',
  ].map((f) => `SecurityContext.${f}`),
  ...['runAsUser', 'runAsGroup', 'runAsNonRoot', 'fsGroup'].map((f) => `PodSecurityContext.${f}`),
  ...[
    'terminationGracePeriodSeconds',
    'activeDeadlineSeconds',
    'automountServiceAccountToken',
    'enableServiceLinks',
    'priority',
    'hostUsers',
    'setHostnameAsFQDN',
    'shareProcessNamespace',
  ].map((f) => `PodSpec.${f}`),
  'Probe.terminationGracePeriodSeconds',
  ...[
    'ConfigMapKeySelector',
    'SecretKeySelector',
    'ConfigMapEnvSource',
    'SecretEnvSource',
    'SecretVolumeSource',
    'ConfigMapVolumeSource',
    'SecretProjection',
    'ConfigMapProjection',
  ].map((m) => `${m}.optional`),
  ...['SecretVolumeSource', 'ConfigMapVolumeSource', 'DownwardAPIVolumeSource', 'ProjectedVolumeSource'].map(
    (m) => `${m}.defaultMode`,
  ),
  'KeyToPath.mode',
  'DownwardAPIVolumeFile.mode',
  'ServiceAccountTokenProjection.expirationSeconds',
  'Toleration.tolerationSeconds',
  'CSIVolumeSource.readOnly',
  'DeploymentSpec.replicas',
  'DeploymentSpec.revisionHistoryLimit',
  'DeploymentSpec.progressDeadlineSeconds',
  'DaemonSetSpec.revisionHistoryLimit',
];
