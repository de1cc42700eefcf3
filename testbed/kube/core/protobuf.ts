/* eslint-disable @typescript-eslint/no-explicit-any -- decoded messages are free-form JSON */
import protobuf from 'protobufjs';
import { badRequest, StatusError } from './errors.js';
import { INLINE } from './proto-schema-pods.js';
import { KEEP_ZERO, K8S_PROTO, PROTO_KINDS } from './proto-schema.js';

export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';
/** Every protobuf body starts with these four bytes (k8s.io/apimachinery/pkg/runtime/serializer/protobuf). */
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const root = protobuf.parse(K8S_PROTO, { keepCase: true }).root;
const lookup = (name: string): protobuf.Type => root.lookupType(`k8s.${name}`);
const UNKNOWN = lookup('Unknown');

const rfc3339 = (seconds: number, nanos: number, micro: boolean): string => {
  const iso = new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, '');
  return micro ? `${iso}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z` : `${iso}Z`;
};

const isZero = (v: unknown): boolean => v === '' || v === 0 || v === false;

/** Turns a decoded message into the JSON the API server would have received for it. */
function toJson(type: protobuf.Type, msg: Record<string, any>): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [name, value] of Object.entries(msg)) {
    const field = type.fields[name];
    if (!field) continue;
    const keepZero = KEEP_ZERO.has(`${type.name}.${name}`);
    const convert = (v: any): any => {
      const sub = field.resolvedType;
      if (!(sub instanceof protobuf.Type))
        return field.type === 'bytes' ? Buffer.from(v, 'base64').toString('base64') : v;
      switch (sub.name) {
        case 'Time':
        case 'MicroTime':
          return v.seconds || v.nanos
            ? rfc3339(Number(v.seconds ?? 0), Number(v.nanos ?? 0), sub.name === 'MicroTime')
            : undefined;
        case 'IntOrString':
          return Number(v.type ?? 0) === 1 ? (v.strVal ?? '') : (v.intVal ?? 0);
        case 'Quantity':
          return v.string ?? '';
        case 'FieldsV1':
        case 'RawExtension': {
          const raw = Buffer.from(v.Raw ?? v.raw ?? '', 'base64').toString('utf8');
          return raw ? JSON.parse(raw) : {};
        }
        default:
          return toJson(sub, v);
      }
    };
    let converted: any;
    if (field.map) {
      const entries = Object.entries(value as Record<string, any>);
      if (!entries.length) continue;
      converted = Object.fromEntries(
        entries.map(([k, v]) => [k, field.type === 'bytes' ? Buffer.from(v, 'base64').toString('base64') : convert(v)]),
      );
    } else if (field.repeated) {
      if (!(value as any[]).length) continue;
      converted = (value as any[]).map(convert);
    } else {
      converted = convert(value);
      if (converted === undefined || (!keepZero && isZero(converted))) continue;
    }
    if (INLINE.has(`${type.name}.${name}`) || INLINE.has(`*.${name}`)) Object.assign(out, converted);
    else out[name] = converted;
  }
  return out;
}

function decodeExactly(type: protobuf.Type, raw: Uint8Array, what: string): Record<string, any> {
  let msg: protobuf.Message;
  try {
    msg = type.decode(raw);
  } catch (e) {
    throw badRequest(`the protobuf body is not a valid ${what}: ${(e as Error).message}`);
  }
  // protobufjs skips fields it does not know; a body that re-encodes shorter carried some, which we refuse
  // rather than store the object without them.
  if (type.encode(msg).finish().length !== raw.length) {
    throw new StatusError(
      415,
      'UnsupportedMediaType',
      `the protobuf ${what} has fields the emulator does not decode; ` +
        'send it as JSON (Content-Type: application/json) instead',
    );
  }
  return type.toObject(msg, { longs: Number, bytes: String, defaults: false, arrays: false, objects: false }) as Record<
    string,
    any
  >;
}

/**
 * Decodes an `application/vnd.kubernetes.protobuf` request body (the `k8s\0` magic, then a
 * `runtime.Unknown` whose `raw` holds the typed message) into the object's JSON, with
 * apiVersion and kind set from the envelope.
 */
export function decodeProtobufObject(body: Buffer): Record<string, any> {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw badRequest('the protobuf body does not start with the Kubernetes magic bytes "k8s\\0"');
  }
  const envelope = decodeExactly(UNKNOWN, body.subarray(MAGIC.length), 'runtime.Unknown envelope');
  const apiVersion: string = envelope.typeMeta?.apiVersion ?? '';
  const kind: string = envelope.typeMeta?.kind ?? '';
  const message = PROTO_KINDS[`${apiVersion}/${kind}`];
  if (!message) {
    throw new StatusError(
      415,
      'UnsupportedMediaType',
      `the emulator does not decode protobuf bodies of ${apiVersion} ${kind || '(no kind)'}; ` +
        'send it as JSON (Content-Type: application/json) instead',
    );
  }
  const type = lookup(message);
  const raw = Buffer.from(envelope.raw ?? '', 'base64');
  return { apiVersion, kind, ...toJson(type, decodeExactly(type, raw, `${apiVersion} ${kind}`)) };
}
