import { POD_PROTO, POD_KEEP_ZERO } from './proto-schema-pods.js';

/**
 * Protobuf message definitions for the built-in kinds that kubectl's and Helm's typed clients send as
 * `application/vnd.kubernetes.protobuf`. Written from the field numbers of the Kubernetes API's
 * published messages (k8s.io/api and k8s.io/apimachinery generated.proto, v1.32); field names are the
 * JSON names, so a decoded message is the object's JSON once the well-known types are converted
 * (see protobuf.ts). Kinds or fields not listed here are refused with a clear error, never dropped.
 */
export const K8S_PROTO = `
syntax = "proto2";

package k8s;

// k8s.io/apimachinery/pkg/runtime
message TypeMeta { optional string apiVersion = 1; optional string kind = 2; }
message Unknown { optional TypeMeta typeMeta = 1; optional bytes raw = 2; optional string contentEncoding = 3; optional string contentType = 4; }
message RawExtension { optional bytes raw = 1; }

// k8s.io/apimachinery/pkg/util/intstr and pkg/api/resource
message IntOrString { optional int64 type = 1; optional int32 intVal = 2; optional string strVal = 3; }
message Quantity { optional string string = 1; }

// k8s.io/apimachinery/pkg/apis/meta/v1
message Time { optional int64 seconds = 1; optional int32 nanos = 2; }
message MicroTime { optional int64 seconds = 1; optional int32 nanos = 2; }
message FieldsV1 { optional bytes Raw = 1; }
message OwnerReference {
  optional string kind = 1; optional string name = 3; optional string uid = 4; optional string apiVersion = 5;
  optional bool controller = 6; optional bool blockOwnerDeletion = 7;
}
message ManagedFieldsEntry {
  optional string manager = 1; optional string operation = 2; optional string apiVersion = 3; optional Time time = 4;
  optional string fieldsType = 6; optional FieldsV1 fieldsV1 = 7; optional string subresource = 8;
}
message ObjectMeta {
  optional string name = 1; optional string generateName = 2; optional string namespace = 3; optional string selfLink = 4;
  optional string uid = 5; optional string resourceVersion = 6; optional int64 generation = 7; optional Time creationTimestamp = 8;
  optional Time deletionTimestamp = 9; optional int64 deletionGracePeriodSeconds = 10; map<string, string> labels = 11;
  map<string, string> annotations = 12; repeated OwnerReference ownerReferences = 13; repeated string finalizers = 14;
  repeated ManagedFieldsEntry managedFields = 17;
}
message Preconditions { optional string uid = 1; optional string resourceVersion = 2; }
message DeleteOptions {
  optional int64 gracePeriodSeconds = 1; optional Preconditions preconditions = 2; optional bool orphanDependents = 3;
  optional string propagationPolicy = 4; repeated string dryRun = 5; optional bool ignoreStoreReadErrorWithClusterBreakingPotential = 6;
}
message LabelSelectorRequirement { optional string key = 1; optional string operator = 2; repeated string values = 3; }
message LabelSelector { map<string, string> matchLabels = 1; repeated LabelSelectorRequirement matchExpressions = 2; }
message Condition {
  optional string type = 1; optional string status = 2; optional int64 observedGeneration = 3; optional Time lastTransitionTime = 4;
  optional string reason = 5; optional string message = 6;
}

// k8s.io/api/core/v1
message ObjectReference {
  optional string kind = 1; optional string namespace = 2; optional string name = 3; optional string uid = 4;
  optional string apiVersion = 5; optional string resourceVersion = 6; optional string fieldPath = 7;
}
message LocalObjectReference { optional string name = 1; }
message NamespaceCondition { optional string type = 1; optional string status = 2; optional Time lastTransitionTime = 4; optional string reason = 5; optional string message = 6; }
message NamespaceSpec { repeated string finalizers = 1; }
message NamespaceStatus { optional string phase = 1; repeated NamespaceCondition conditions = 2; }
message Namespace { optional ObjectMeta metadata = 1; optional NamespaceSpec spec = 2; optional NamespaceStatus status = 3; }
message Secret {
  optional ObjectMeta metadata = 1; map<string, bytes> data = 2; optional string type = 3; map<string, string> stringData = 4;
  optional bool immutable = 5;
}
message ConfigMap { optional ObjectMeta metadata = 1; map<string, string> data = 2; map<string, bytes> binaryData = 3; optional bool immutable = 4; }
message ServiceAccount {
  optional ObjectMeta metadata = 1; repeated ObjectReference secrets = 2; repeated LocalObjectReference imagePullSecrets = 3;
  optional bool automountServiceAccountToken = 4;
}
message ServicePort {
  optional string name = 1; optional string protocol = 2; optional int32 port = 3; optional IntOrString targetPort = 4;
  optional int32 nodePort = 5; optional string appProtocol = 6;
}
message ClientIPConfig { optional int32 timeoutSeconds = 1; }
message SessionAffinityConfig { optional ClientIPConfig clientIP = 1; }
message ServiceSpec {
  repeated ServicePort ports = 1; map<string, string> selector = 2; optional string clusterIP = 3; optional string type = 4;
  repeated string externalIPs = 5; optional string sessionAffinity = 7; optional string loadBalancerIP = 8;
  repeated string loadBalancerSourceRanges = 9; optional string externalName = 10; optional string externalTrafficPolicy = 11;
  optional int32 healthCheckNodePort = 12; optional bool publishNotReadyAddresses = 13; optional SessionAffinityConfig sessionAffinityConfig = 14;
  optional string ipFamilyPolicy = 17; repeated string clusterIPs = 18; repeated string ipFamilies = 19;
  optional bool allocateLoadBalancerNodePorts = 20; optional string loadBalancerClass = 21; optional string internalTrafficPolicy = 22;
  optional string trafficDistribution = 23;
}
message PortStatus { optional int32 port = 1; optional string protocol = 2; optional string error = 3; }
message LoadBalancerIngress { optional string ip = 1; optional string hostname = 2; optional string ipMode = 3; repeated PortStatus ports = 4; }
message LoadBalancerStatus { repeated LoadBalancerIngress ingress = 1; }
message ServiceStatus { optional LoadBalancerStatus loadBalancer = 1; repeated Condition conditions = 2; }
message Service { optional ObjectMeta metadata = 1; optional ServiceSpec spec = 2; optional ServiceStatus status = 3; }
message EventSource { optional string component = 1; optional string host = 2; }
message EventSeries { optional int32 count = 1; optional MicroTime lastObservedTime = 2; }
message Event {
  optional ObjectMeta metadata = 1; optional ObjectReference involvedObject = 2; optional string reason = 3; optional string message = 4;
  optional EventSource source = 5; optional Time firstTimestamp = 6; optional Time lastTimestamp = 7; optional int32 count = 8;
  optional string type = 9; optional MicroTime eventTime = 10; optional EventSeries series = 11; optional string action = 12;
  optional ObjectReference related = 13; optional string reportingComponent = 14; optional string reportingInstance = 15;
}

// k8s.io/api/coordination/v1
message LeaseSpec {
  optional string holderIdentity = 1; optional int32 leaseDurationSeconds = 2; optional MicroTime acquireTime = 3;
  optional MicroTime renewTime = 4; optional int32 leaseTransitions = 5; optional string strategy = 6; optional string preferredHolder = 7;
}
message Lease { optional ObjectMeta metadata = 1; optional LeaseSpec spec = 2; }

// k8s.io/api/rbac/v1
message PolicyRule { repeated string verbs = 1; repeated string apiGroups = 2; repeated string resources = 3; repeated string resourceNames = 4; repeated string nonResourceURLs = 5; }
message AggregationRule { repeated LabelSelector clusterRoleSelectors = 1; }
message Role { optional ObjectMeta metadata = 1; repeated PolicyRule rules = 2; }
message ClusterRole { optional ObjectMeta metadata = 1; repeated PolicyRule rules = 2; optional AggregationRule aggregationRule = 3; }
message Subject { optional string kind = 1; optional string apiGroup = 2; optional string name = 3; optional string namespace = 4; }
message RoleRef { optional string apiGroup = 1; optional string kind = 2; optional string name = 3; }
message RoleBinding { optional ObjectMeta metadata = 1; repeated Subject subjects = 2; optional RoleRef roleRef = 3; }
message ClusterRoleBinding { optional ObjectMeta metadata = 1; repeated Subject subjects = 2; optional RoleRef roleRef = 3; }

// k8s.io/api/authorization/v1
message FieldSelectorRequirement { optional string key = 1; optional string operator = 2; repeated string values = 3; }
message FieldSelectorAttributes { optional string rawSelector = 1; repeated FieldSelectorRequirement requirements = 2; }
message LabelSelectorAttributes { optional string rawSelector = 1; repeated LabelSelectorRequirement requirements = 2; }
message ResourceAttributes {
  optional string namespace = 1; optional string verb = 2; optional string group = 3; optional string version = 4;
  optional string resource = 5; optional string subresource = 6; optional string name = 7;
  optional FieldSelectorAttributes fieldSelector = 8; optional LabelSelectorAttributes labelSelector = 9;
}
message NonResourceAttributes { optional string path = 1; optional string verb = 2; }
message SelfSubjectAccessReviewSpec { optional ResourceAttributes resourceAttributes = 1; optional NonResourceAttributes nonResourceAttributes = 2; }
message SubjectAccessReviewStatus { optional bool allowed = 1; optional string reason = 2; optional string evaluationError = 3; optional bool denied = 4; }
message SelfSubjectAccessReview { optional ObjectMeta metadata = 1; optional SelfSubjectAccessReviewSpec spec = 2; optional SubjectAccessReviewStatus status = 3; }

message SelfSubjectRulesReviewSpec { optional string namespace = 1; }
message ResourceRule { repeated string verbs = 1; repeated string apiGroups = 2; repeated string resources = 3; repeated string resourceNames = 4; }
message NonResourceRule { repeated string verbs = 1; repeated string nonResourceURLs = 2; }
message SubjectRulesReviewStatus { repeated ResourceRule resourceRules = 1; repeated NonResourceRule nonResourceRules = 2; optional bool incomplete = 3; optional string evaluationError = 4; }
message SelfSubjectRulesReview { optional ObjectMeta metadata = 1; optional SelfSubjectRulesReviewSpec spec = 2; optional SubjectRulesReviewStatus status = 3; }

// k8s.io/api/authentication/v1
message BoundObjectReference { optional string kind = 1; optional string apiVersion = 2; optional string name = 3; optional string uid = 4; }
message TokenRequestSpec { repeated string audiences = 1; optional BoundObjectReference boundObjectRef = 3; optional int64 expirationSeconds = 4; }
message TokenRequestStatus { optional string token = 1; optional Time expirationTimestamp = 2; }
message ExtraValue { repeated string items = 1; }
message UserInfo { optional string username = 1; optional string uid = 2; repeated string groups = 3; map<string, ExtraValue> extra = 4; }
message SelfSubjectReviewStatus { optional UserInfo userInfo = 1; }
message SelfSubjectReview { optional ObjectMeta metadata = 1; optional SelfSubjectReviewStatus status = 2; }
message TokenRequest { optional ObjectMeta metadata = 1; optional TokenRequestSpec spec = 2; optional TokenRequestStatus status = 3; }
${POD_PROTO}`;

/** Which message a `runtime.Unknown` carries, by its apiVersion and kind. */
export const PROTO_KINDS: Record<string, string> = {
  'v1/DeleteOptions': 'DeleteOptions',
  'meta.k8s.io/v1/DeleteOptions': 'DeleteOptions',
  'v1/Namespace': 'Namespace',
  'v1/Secret': 'Secret',
  'v1/ConfigMap': 'ConfigMap',
  'v1/ServiceAccount': 'ServiceAccount',
  'v1/Service': 'Service',
  'v1/Event': 'Event',
  'v1/Pod': 'Pod',
  'apps/v1/Deployment': 'Deployment',
  'apps/v1/DaemonSet': 'DaemonSet',
  'policy/v1/PodDisruptionBudget': 'PodDisruptionBudget',
  'coordination.k8s.io/v1/Lease': 'Lease',
  'rbac.authorization.k8s.io/v1/Role': 'Role',
  'rbac.authorization.k8s.io/v1/ClusterRole': 'ClusterRole',
  'rbac.authorization.k8s.io/v1/RoleBinding': 'RoleBinding',
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': 'ClusterRoleBinding',
  'authorization.k8s.io/v1/SelfSubjectAccessReview': 'SelfSubjectAccessReview',
  'authorization.k8s.io/v1/SelfSubjectRulesReview': 'SelfSubjectRulesReview',
  'authentication.k8s.io/v1/TokenRequest': 'TokenRequest',
  'authentication.k8s.io/v1/SelfSubjectReview': 'SelfSubjectReview',
};

/**
 * Pointer fields (`*bool`, `*int32`) whose zero value means something: Go sends them only when set, so
 * a decoded zero is kept; every other zero-valued scalar is left out, as Go's `omitempty` JSON does.
 */
export const KEEP_ZERO = new Set([
  'DeleteOptions.gracePeriodSeconds',
  'DeleteOptions.orphanDependents',
  'Secret.immutable',
  'ConfigMap.immutable',
  'ServiceAccount.automountServiceAccountToken',
  'ServiceSpec.allocateLoadBalancerNodePorts',
  'LeaseSpec.leaseDurationSeconds',
  'LeaseSpec.leaseTransitions',
  'OwnerReference.controller',
  'OwnerReference.blockOwnerDeletion',
  'TokenRequestSpec.expirationSeconds',
  ...POD_KEEP_ZERO,
]);
