// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Returns the paths of the objects in a JSON text that name a member twice:
 * "" for the top-level value, "/keys/2" for the third element of its "keys"
 * list, and so on. JSON.parse keeps the last of two members silently; the
 * Go SDK's JOSE library refuses a token's header or claims, or a key, that
 * repeats a member, and the verifier does the same with these paths. The
 * text must be JSON that JSON.parse accepted.
 * @internal
 */
export function objectsWithDuplicateMembers(text: string): Set<string> {
  const found = new Set<string>();
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\r\n".includes(text[i] as string)) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // the opening quote
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const seen = new Set<string>();
      ws();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = str();
        if (seen.has(key)) found.add(path);
        seen.add(key);
        ws();
        i++; // the colon
        value(`${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`);
        ws();
        if (text[i++] === "}") return;
      }
    } else if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${path}/${n}`);
        ws();
        if (text[i++] === "]") return;
      }
    } else if (c === '"') {
      str();
    } else {
      while (i < text.length && !",]} \t\r\n".includes(text[i] as string)) i++;
    }
  };
  value("");
  return found;
}
