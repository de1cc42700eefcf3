import { describe, expect, it } from '@jest/globals';
import { bar, renderLine, renderScreen, type DemoView } from '../../testbed/demo/view.js';

const view: DemoView = {
  nodes: 12,
  ready: 9,
  available: 120,
  used: 30,
  actions: [
    { action: 'AttachNetworkInterface', total: 14, lastMinute: 14, quotaPerMinute: 500 },
    { action: 'CreateNetworkInterface', total: 14, lastMinute: 14, quotaPerMinute: 500 },
    { action: 'DescribeNetworkInterfaces', total: 6, lastMinute: 3, quotaPerMinute: 800 },
    { action: 'AssignPrivateIpAddresses', total: 0, lastMinute: 0, quotaPerMinute: 400 },
    { action: 'UnassignPrivateIpAddresses', total: 0, lastMinute: 0, quotaPerMinute: 400 },
  ],
  throttled: 2,
  allocations: 40,
  emptyPoolWaits: 1,
  events: [
    '  CreatedENI ENIPool/node-01: created eni-1 in vsw-h-pods with 5 IPs',
    '! VSwitchExhausted ENIPool/node-07: vsw-i-small has no free address',
  ],
  elapsedSeconds: 12.7,
  metricsUrl: 'http://127.0.0.1:9090/metrics',
  kubectl: 'kubectl --kubeconfig /tmp/eni-ipam-demo/kubeconfig get enipools',
};

describe('the demo view', () => {
  it('draws a bar in proportion', () => {
    expect(bar(0, 10, 10)).toBe('[..........]');
    expect(bar(5, 10, 10)).toBe('[#####.....]');
    expect(bar(10, 10, 10)).toBe('[##########]');
    expect(bar(3, 0, 4)).toBe('[....]');
  });

  it('prints one plain line with readiness, IPs, mutating calls and throttling', () => {
    expect(renderLine(view)).toBe(
      'nodes ready 9/12 | IPs available 120 used 30 | CreateENI 14, AttachENI 14, AssignIPs 0, UnassignIPs 0 | throttled 2',
    );
  });

  it('shows every part the live view promises, within the terminal width', () => {
    const screen = renderScreen(view, 100);
    const text = screen.join('\n');
    expect(text).toContain(`nodes ready  ${bar(9, 12, 40)} 9/12`);
    expect(text).toContain('available 120, used 30; handed out 40, waits on an empty pool 1');
    expect(text).toContain('throttled    2');
    expect(text).toMatch(/CreateNetworkInterface\s+14 {2}\[#?\.+\]\s+14\/500 per min/);
    expect(text).toMatch(/DescribeNetworkInterfaces\s+6 {2}\[\.+\]\s+3\/800 per min/);
    expect(text).toContain('! VSwitchExhausted ENIPool/node-07');
    expect(text).toContain('metrics   http://127.0.0.1:9090/metrics');
    expect(text).toContain(view.kubectl);
    expect(Math.max(...renderScreen(view, 60).map((l) => l.length))).toBeLessThanOrEqual(60);
  });
});
