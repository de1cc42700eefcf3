import type { Credentials } from './credentials.js';

/**
 * The credentials provider pop-core's request() asks, for one RpcCaller: it hands the request
 * the credentials its call already fetched (no I/O, so nothing delays the send) after running
 * the check the call was armed with, so that check is the last word before pop-core signs and
 * sends. pop-core asks synchronously as request() starts (@alicloud/pop-core 1.8, lib/rpc.js),
 * so the call armed right before request() is the one asking.
 */
export class SendGate {
  private next?: { credentials: Credentials; check: () => void };

  arm(credentials: Credentials, check: () => void): void {
    this.next = { credentials, check };
  }

  async getCredentials(): Promise<Credentials> {
    const armed = this.next;
    this.next = undefined;
    if (!armed) throw new Error('internal: an OpenAPI request was sent without arming its credentials');
    armed.check();
    return armed.credentials;
  }
}
