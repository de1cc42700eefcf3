import { createHmac, timingSafeEqual } from 'node:crypto';

/** RFC 3986 percent-encoding as the Alibaba Cloud RPC signature (V2) defines it. */
export function percentEncode(value: string): string {
  return encodeURIComponent(value)
    .replace(/!/g, '%21')
    .replace(/'/g, '%27')
    .replace(/\(/g, '%28')
    .replace(/\)/g, '%29')
    .replace(/\*/g, '%2A');
}

/** Every received parameter except Signature, sorted by key in byte order, as k=v&k=v. */
export function canonicalQuery(params: Record<string, string>): string {
  return Object.keys(params)
    .filter((k) => k !== 'Signature')
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((k) => `${percentEncode(k)}=${percentEncode(params[k] ?? '')}`)
    .join('&');
}

export function stringToSign(method: string, params: Record<string, string>): string {
  return `${method.toUpperCase()}&${percentEncode('/')}&${percentEncode(canonicalQuery(params))}`;
}

export function signRpc(method: string, params: Record<string, string>, accessKeySecret: string): string {
  return createHmac('sha1', `${accessKeySecret}&`).update(stringToSign(method, params)).digest('base64');
}

export function signatureMatches(expected: string, received: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(received);
  return a.length === b.length && timingSafeEqual(a, b);
}
