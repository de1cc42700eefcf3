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
    },
  },
);
