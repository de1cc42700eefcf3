/**
 * The repository this testbed runs from, the same from the sources (testbed/...), the build
 * (dist/testbed/...) and the suites' builds (dist-chaos/testbed/...): the nearest directory up
 * whose package.json names eni-ipam.
 */
export declare function findCheckout(from?: string): string;
export declare const CHECKOUT: string;
