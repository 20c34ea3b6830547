import js from '@eslint/js';
import simpleImportSort from 'eslint-plugin-simple-import-sort';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', 'node_modules/**', '.cairn/**', 'coverage/**', '**/.build/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.mjs', '*.cjs', '*.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { 'simple-import-sort': simpleImportSort },
    rules: {
      eqeqeq: ['error', 'always'],
      // Async methods that only return a promise still turn synchronous throws into rejections.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'simple-import-sort/imports': 'error',
      'simple-import-sort/exports': 'error',
    },
  },
  // The architecture, enforced: the domain (shared/) knows no trigger, host or client; the triggers
  // (functions/) know no development host or client; the client knows no server code.
  {
    files: ['shared/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: '@azure/functions', message: 'shared/ is the domain: no trigger types.' },
            { name: 'durable-functions', message: 'shared/ is the domain: no trigger types.' },
          ],
          patterns: [
            { regex: '(^|/)(functions|dev|client|test)/', message: 'shared/ imports only shared/.' },
          ],
        },
      ],
    },
  },
  {
    files: ['functions/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(dev|client|test)/',
              message: 'functions/ imports only shared/ (no development host, client or test code).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: '@azure/functions', message: 'The client runs outside the Functions host.' },
            { name: 'durable-functions', message: 'The client runs outside the Functions host.' },
          ],
          patterns: [
            {
              regex: '(^|/)(functions|dev|test)/|/storage/|^@azure/',
              message: 'The client talks HTTP: no server, storage or development host code.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
