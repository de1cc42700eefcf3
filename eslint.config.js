import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'dist-bench/', 'dist-chaos/', 'node_modules/', '.tools/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
    },
  },
  {
    // src/ is the product: the image carries it alone, so it never imports the testbed.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/testbed', '**/testbed/**'],
              message: 'src/ is the product and never imports testbed/ (the CLI loads it by path: src/cli/testbed.ts)',
            },
          ],
        },
      ],
      // Time is passed in (src/clock.ts), so that tests run on a fake clock.
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']",
          message: 'take a Clock (src/clock.ts) instead of reading Date.now()',
        },
      ],
    },
  },
  {
    // The clock itself, and the timer components that run on real time by design: leader election
    // (a monotonic clock for its durations, the wall clock for the Lease's times) and the API
    // limiters (Bottleneck keeps real time; their wait is measured on it).
    files: ['src/clock.ts', 'src/kube/leader-election.ts', 'src/cloud/limits.ts'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
