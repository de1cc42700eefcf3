import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ACTIONS, ECS_VERSION } from './actions.js';
import type { Authenticator } from './auth.js';
import type { ActionContext } from './eni-actions.js';
import { ApiError, apiError, invalid, missing } from './errors.js';
import type { FaultDecision } from './faults.js';
import type { Fixture } from './fixture.js';
import type { CallJournal, Touched } from './journal.js';
import { Params } from './params.js';
import { STS_VERSION, assumeRoleWithOidc, type OidcVerifier } from './sts.js';
import type { ActionQuotas } from './quotas.js';
import type { World } from './world.js';

/** Parameters that belong to the protocol, not to the call; excluded from idempotency checks. */
const COMMON = new Set([
  'Action',
  'Version',
  'Format',
  'AccessKeyId',
  'SignatureMethod',
  'SignatureVersion',
  'SignatureNonce',
  'SignatureType',
  'Timestamp',
  'Signature',
  'SecurityToken',
]);

export interface CallStats {
  /**
   * Calls per action and answer code (`OK` for success; for injected faults `Timeout`, `NonJson`,
   * `DropAnswer`, and `HttpNoCode`, `MissingField`, `WrongField`, `RepeatNextToken`, `EmptyAnswer`).
   */
  calls: Record<string, Record<string, number>>;
  total: number;
}

export interface RpcDeps {
  /** Takes service-account tokens of an emulated cluster for AssumeRoleWithOIDC. */
  oidcVerifier?: OidcVerifier;
  world: World;
  auth: Authenticator;
  quotas: ActionQuotas;
  fixture: Fixture;
  ownerId: string;
  stats: CallStats;
  /** Responses held open by an injected timeout; ended when the emulator closes. */
  held: Set<ServerResponse>;
  journal: CallJournal;
}

async function readParams(req: IncomingMessage, url: URL): Promise<Record<string, string>> {
  const params: Record<string, string> = {};
  for (const [k, v] of url.searchParams) params[k] = v;
  if (req.method === 'POST') {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const type = String(req.headers['content-type'] ?? '');
    if (body && (type.startsWith('application/x-www-form-urlencoded') || !type)) {
      for (const [k, v] of new URLSearchParams(body)) params[k] = v;
    }
  }
  return params;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The journal's code for an answer a fault mangled (`missing-field` -> `MissingField`). */
const faultCode = (kind: string): string => kind.replace(/(^|-)(\w)/g, (_, _dash, c: string) => c.toUpperCase());

/** The answer as a fault makes it: a field gone or wrong, the call's NextToken again, or nothing. */
function mangled(answer: Record<string, unknown>, fault: FaultDecision, mainField: string, nextToken?: string) {
  switch (fault.kind) {
    case 'missing-field': {
      const { [fault.field ?? mainField]: _gone, ...rest } = answer;
      return rest;
    }
    case 'wrong-field':
      return { ...answer, [fault.field]: fault.value };
    case 'repeat-next-token':
      return { ...answer, NextToken: nextToken };
    case 'empty-answer':
      return {};
    default:
      return answer;
  }
}

function count(stats: CallStats, action: string, code: string): void {
  const perAction = (stats.calls[action] ??= {});
  perAction[code] = (perAction[code] ?? 0) + 1;
  stats.total++;
}

/** Serves one OpenAPI RPC call (ECS 2014-05-26 or VPC 2016-04-28), GET or POST. */
export function rpcHandler(deps: RpcDeps) {
  const { world, auth, quotas, fixture, stats } = deps;
  const idempotency = new Map<string, { fingerprint: string; response: object }>();
  const ctxBase = {
    world,
    ownerId: deps.ownerId,
    delays: { attachMs: 2000, detachMs: 2000, deleteMs: 500, ...fixture.delays },
    limits: {
      createSecondaryIpsMax: fixture.limits?.createSecondaryIpsMax ?? 49,
      assignPerCallWhenAvailable: fixture.limits?.assignPerCallWhenAvailable ?? 10,
      enisPerRegion: fixture.quotas?.enisPerRegion ?? 1000,
    },
  };

  const send = (res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json;charset=utf-8', ...headers }).end(JSON.stringify(body));
  };

  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const requestId = randomUUID().toUpperCase();
    let action = 'Unknown';
    let hostId = `ecs.${world.region}.aliyuncs.com`;
    const who: { accessKeyId?: string; clientToken?: string; eniId?: string } = {};
    let touched: Touched | undefined;
    const answered = (code: string) => {
      count(stats, action, code);
      deps.journal.record({ action, code, ...who }, touched);
    };
    try {
      if (req.method !== 'GET' && req.method !== 'POST') {
        throw apiError('UnsupportedHTTPMethod', `The HTTP method ${req.method} is not supported; use GET or POST.`);
      }
      const raw = await readParams(req, url);
      if (!raw.Action) throw missing('Action');
      action = raw.Action;
      who.accessKeyId = raw.AccessKeyId || undefined;
      // Noted before the call is judged, so that a throttled or failed create shows its token too.
      who.clientToken = raw.ClientToken || undefined;
      if (!raw.Version) throw missing('Version');
      if (raw.Version === STS_VERSION && action === 'AssumeRoleWithOIDC') {
        hostId = 'sts.aliyuncs.com';
        const answer = assumeRoleWithOidc(auth, fixture.oidcRoles ?? [], raw, Date.now(), deps.oidcVerifier);
        answered('OK');
        return send(res, 200, { RequestId: requestId, ...answer });
      }
      const defs = ACTIONS[raw.Version];
      if (!defs) throw invalid('Version', `"${raw.Version}" is not a supported API version`);
      if (raw.Version !== ECS_VERSION) hostId = `vpc.${world.region}.aliyuncs.com`;
      if (raw.Format && raw.Format.toUpperCase() !== 'JSON') throw invalid('Format', 'this endpoint answers JSON only');
      const accessKeyId = auth.verify(req.method, raw);
      const def = defs[action];
      if (!def)
        throw apiError(
          'InvalidAction.NotFound',
          `Specified api is not found, please check your url and method. (${action}, ${raw.Version})`,
        );
      const params = new Params(raw);
      if (def.regional) {
        const region = params.required('RegionId');
        if (region !== world.region)
          throw apiError('InvalidRegionId.NotFound', `The specified RegionId "${region}" does not exist.`);
      } else if (raw.RegionId && raw.RegionId !== world.region) {
        throw apiError('InvalidRegionId.NotFound', `The specified RegionId "${raw.RegionId}" does not exist.`);
      }

      const quota = quotas.take(action, world.clock.now());
      if (!quota.ok) {
        const timeLeft = Math.max(1, Math.ceil(world.clock.toReal(quota.waitMs)));
        const e = apiError('Throttling.User', 'Request was denied due to user flow control.', {
          'x-ratelimit-user-api': `Limit:${quota.limit},Remain:0,TimeLeft:${timeLeft},Reset:${Date.now() + timeLeft}`,
        });
        throw new ApiError(fixture.quotas?.throttlingStatus ?? 400, e.code, e.message, e.headers);
      }

      const faults = world.faultInjector;
      const latency = faults.latencyMs(action);
      if (latency > 0) await sleep(world.clock.toReal(latency));
      const fault = faults.decide(action, raw.NextToken);
      if (fault.kind === 'timeout') {
        answered('Timeout');
        deps.held.add(res);
        res.on('close', () => deps.held.delete(res));
        return;
      }
      if (fault.kind === 'non-json') {
        answered('NonJson');
        res
          .writeHead(502, { 'content-type': 'text/html' })
          .end(
            '<html><head><title>502 Bad Gateway</title></head>' +
              '<body><center><h1>502 Bad Gateway</h1></center></body></html>',
          );
        return;
      }
      if (fault.kind === 'error') throw apiError(fault.code, `Injected fault: ${fault.code}.`);
      if (fault.kind === 'http-no-code') {
        // A gateway's answer: it never reached the API, so there is no Code, and the call was not carried out.
        answered(faultCode(fault.kind));
        return send(res, fault.status, {
          RequestId: requestId,
          Message: `The gateway could not reach the service (HTTP ${fault.status}); try again later.`,
        });
      }
      // What goes back: the answer, as the fault (if any) leaves it. A token's replay goes the same way.
      const reply = (answer: object): void => {
        const mangling = fault.kind !== 'none' && fault.kind !== 'drop-answer';
        answered(mangling ? faultCode(fault.kind) : 'OK');
        send(res, 200, mangling ? mangled({ ...answer }, fault, def.mainField, raw.NextToken) : answer);
      };

      const token = def.idempotent ? params.str('ClientToken') : undefined;
      if (token !== undefined && token.length > 64) throw invalid('ClientToken', 'at most 64 ASCII characters');
      const key = token === undefined ? undefined : `${accessKeyId}/${action}/${token}`;
      const fingerprint = JSON.stringify(
        Object.entries(raw)
          .filter(([k]) => !COMMON.has(k))
          .sort(),
      );
      const previous = key ? idempotency.get(key) : undefined;
      if (previous) {
        if (previous.fingerprint !== fingerprint) {
          throw apiError(
            'IdempotentParameterMismatch',
            'The request uses the same client token as a previous, but non-identical request.',
          );
        }
        // A replay changes nothing: it names the ENI, not addresses.
        who.eniId =
          params.str('NetworkInterfaceId') ?? (previous.response as { NetworkInterfaceId?: string }).NetworkInterfaceId;
        return reply({ RequestId: requestId, ...previous.response });
      }

      world.advance();
      const ctx: ActionContext = { ...ctxBase, params };
      if (def.mutating) {
        const requested = action.startsWith('Unassign')
          ? Object.entries(raw)
              .filter(([k]) => /^(PrivateIpAddress|Ipv6Address|Ipv6Prefix)\.\d+$/.test(k))
              .map(([, v]) => v)
          : [];
        const before = deps.journal.before(world, params.str('NetworkInterfaceId'), params.str('InstanceId'));
        touched = { before, world, action, requested };
      }
      const response = def.handler(ctx);
      if (touched) touched.response = response;
      if (def.mutating) await Promise.all([...world.dataPlanes].map((inEffect) => inEffect()));
      if (fault.kind === 'drop-answer') {
        if (key) idempotency.set(key, { fingerprint, response });
        answered('DropAnswer');
        res.socket?.destroy();
        return;
      }
      if (key) {
        idempotency.set(key, { fingerprint, response });
        // Tokens are kept for the last 100,000 idempotent calls (the real window is unstated).
        if (idempotency.size > 100_000) idempotency.delete(idempotency.keys().next().value!);
      }
      reply({ RequestId: requestId, ...response });
    } catch (err) {
      const e =
        err instanceof ApiError
          ? err
          : apiError('InternalError', 'The request processing has failed due to some unknown error.');
      if (!(err instanceof ApiError)) console.error('ecs emulator: internal error', err);
      answered(e.code);
      send(
        res,
        e.status,
        {
          RequestId: requestId,
          HostId: hostId,
          Code: e.code,
          Message: e.message,
          Recommend: `https://api.aliyun.com/troubleshoot?q=${encodeURIComponent(e.code)}&product=Ecs`,
        },
        e.headers,
      );
    }
  };
}
