// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// ESLint for the SDK, its tests and its example (npm run lint, run by make
// verify): ESLint's recommended rules and typescript-eslint's, with the type
// checker, and the few changes below, each with its reason.

import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "build/", "node_modules/", "src/gen/"] },
  js.configs.recommended,
  {
    files: ["**/*.ts"],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      // tsconfig.eslint.json reads @openfief/sdk's types from src, not from
      // the built dist: the lint needs no build, and make verify does not
      // race make test rebuilding dist beside it (a fresh clone failed so).
      // make test's build:test still checks the examples against dist.
      parserOptions: { project: "./tsconfig.eslint.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Off: the SDK catches an error and throws its own, whose message says
      // what failed in the SDK's words and holds only what the SDK chose to
      // say (never a token or a file's content). A cause would carry the
      // caught error along, whatever it holds.
      "preserve-caught-error": "off",
    },
  },
  {
    files: ["test/**/*.ts"],
    rules: {
      // node:test's test() and describe() return promises the runner itself
      // awaits; every other promise must still be awaited or handled.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["test", "describe"] },
          ],
        },
      ],
      // Off in tests: the test services' handlers are async like the
      // plugins' they stand for, and an async generator is the shortest
      // AsyncIterable of messages, whether or not they await anything.
      "@typescript-eslint/require-await": "off",
    },
  },
);
