import { request, type RequestOptions } from 'node:https';

/** An API server's answer: its status, its body (JSON parsed when it is) and its headers. */
export interface RestAnswer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  headers: NodeJS.Dict<string | string[]>;
}

/**
 * One request over HTTPS with `options` (credentials, CA, agent), a body sent as JSON (or as
 * given when a string) with its length, the answer read whole. Objects stay as the API serves
 * them (timestamps as strings, every field), which client-node's typed models would convert.
 */
export function httpsJson(
  url: string,
  options: RequestOptions,
  body?: unknown,
  contentType = 'application/json',
): Promise<RestAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, options, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* not JSON: kept as text */
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, headers: res.headers });
      });
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${options.method ?? 'GET'} ${url}: no answer within 30 s`)));
    req.on('error', reject);
    if (body === undefined) return void req.end();
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    req.setHeader('content-type', contentType);
    req.setHeader('content-length', Buffer.byteLength(text));
    req.end(text);
  });
}
