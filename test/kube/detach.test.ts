import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { detachStrings } from '../../src/kube/detach.js';

describe('detachStrings', () => {
  it('keeps every value of a parsed JSON document, in place', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const parsed = JSON.parse(JSON.stringify({ wrap: v }));
        const copy = structuredClone(parsed);
        expect(detachStrings(parsed)).toBe(parsed);
        expect(parsed).toEqual(copy);
      }),
    );
  });
});
