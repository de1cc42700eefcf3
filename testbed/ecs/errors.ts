/** An OpenAPI error answer: a non-2xx status and {RequestId, HostId, Code, Message, Recommend}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

// HTTP status per code, from the ECS error tables (reference/ecs-openapi.md B1.x).
const STATUS: Record<string, number> = {
  'InvalidVSwitchId.IpNotEnough': 403,
  EniPerInstanceLimitExceeded: 403,
  MaxEniCountExceeded: 403,
  MaxEniPrivateIpsCountExceeded: 403,
  'InvalidOperation.Ipv4CountExceeded': 403,
  'InvalidOperation.Ipv6CountExceeded': 403,
  MaxEniIpv6IpsCountExceeded: 403,
  'InvalidOperation.InvalidEniState': 400,
  'InvalidOperation.InvalidEcsState': 400,
  'InvalidOperation.DetachPrimaryEniNotAllowed': 400,
  'InvalidOperation.InvalidEniType': 403,
  'InvalidOperation.AvailabilityZoneMismatch': 403,
  'InvalidOperation.VpcMismatch': 403,
  'InvalidEniId.NotFound': 404,
  'InvalidInstanceId.NotFound': 403,
  'InvalidVSwitchId.NotFound': 404,
  'InvalidVpcId.NotFound': 404,
  'InvalidSecurityGroupId.NotFound': 404,
  'InvalidParameter.Conflict': 400,
  InvalidParameter: 400,
  MissingParameter: 400,
  'InvalidIp.IpAssigned': 403,
  'InvalidIp.IpUnassigned': 403,
  'InvalidIp.Address': 403,
  'InvalidVSwitchId.IpInvalid': 403,
  'InvalidVSwitch.Ipv6NotTurnOn': 403,
  'Duplicate.TagKey': 400,
  'InvalidTagKey.Malformed': 400,
  'QuotaExceed.Tags': 403,
  'Operation.Conflict': 403,
  Throttling: 400,
  'Throttling.User': 400,
  SignatureNonceUsed: 400,
  SignatureDoesNotMatch: 400,
  IncompleteSignature: 400,
  IllegalTimestamp: 400,
  'InvalidAccessKeyId.NotFound': 400,
  'InvalidSecurityToken.Expired': 400,
  'InvalidSecurityToken.MismatchWithAccessKey': 400,
  IdempotentParameterMismatch: 400,
  'InvalidAction.NotFound': 404,
  UnsupportedHTTPMethod: 403,
  'InvalidRegionId.NotFound': 404,
  InternalError: 500,
  ServiceUnavailable: 503,
};

export function apiError(code: string, message: string, headers?: Record<string, string>): ApiError {
  return new ApiError(STATUS[code] ?? 400, code, message, headers);
}

export const missing = (name: string): ApiError =>
  apiError(
    'MissingParameter',
    `The input parameter "${name}" that is mandatory for processing this request is not supplied.`,
  );

export const invalid = (name: string, why: string): ApiError =>
  apiError('InvalidParameter', `The specified parameter "${name}" is not valid: ${why}`);
