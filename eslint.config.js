// Lint rules that guard against the bugs an async, event-driven gateway is prone to:
// promises nobody awaits and promises passed where a callback is expected.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Top-level folders of the product, highest first: a folder imports only from those after it. */
const LAYERS = ['gateway', 'agents', 'jobs', 'config'];
/** Folders only tooling may import; product code never depends on them. */
const TOOLING = ['test', 'bench', 'scripts'];

/**
 * One `files:` block per layer that forbids a relative import (`../gateway/...`,
 * `../../agents/...`) of a layer above it or of a tooling folder.
 * Pinned by test/unit/ops/layering-lint.test.ts.
 */
function layeringBlocks() {
  return LAYERS.map((layer, index) => {
    const forbidden = [...LAYERS.slice(0, index), ...TOOLING];
    const below = LAYERS.slice(index + 1);
    return {
      files: [`${layer}/**/*.ts`],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              {
                regex: `^(\\.\\./)+(${forbidden.join('|')})(/|$)`,
                message: `${layer}/ imports ${below.length > 0 ? `only from ${below.join(', ')}` : 'no other folder'} (DESIGN.md: gateway -> agents -> jobs -> config).`,
              },
            ],
          },
        ],
      },
    };
  });
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'helm/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      '@typescript-eslint/require-await': 'off',
    },
  },
  ...layeringBlocks(),
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
