import { invalid, missing } from './errors.js';

/** Typed reads of the flat RPC parameters (`Name.N`, `Tag.N.Key`) with the API's errors. */
export class Params {
  constructor(readonly raw: Record<string, string>) {}

  str(name: string): string | undefined {
    const v = this.raw[name];
    return v === undefined || v === '' ? undefined : v;
  }

  required(name: string): string {
    const v = this.str(name);
    if (v === undefined) throw missing(name);
    return v;
  }

  int(name: string, min: number, max: number): number | undefined {
    const v = this.str(name);
    if (v === undefined) return undefined;
    if (!/^-?\d+$/.test(v)) throw invalid(name, `"${v}" is not an integer`);
    const n = Number(v);
    if (n < min || n > max) throw invalid(name, `${n} is outside ${min}-${max}`);
    return n;
  }

  bool(name: string): boolean | undefined {
    const v = this.str(name);
    if (v === undefined) return undefined;
    if (v !== 'true' && v !== 'false') throw invalid(name, `"${v}" is not true or false`);
    return v === 'true';
  }

  /** `Name.1`, `Name.2`, ... in index order; at most `max` entries. */
  list(name: string, max: number): string[] {
    const entries: Array<[number, string]> = [];
    const re = new RegExp(`^${name.replace('.', '\\.')}\\.(\\d+)$`);
    for (const [k, v] of Object.entries(this.raw)) {
      const m = re.exec(k);
      if (m) entries.push([Number(m[1]), v]);
    }
    if (entries.length > max) throw invalid(name, `at most ${max} values are allowed, got ${entries.length}`);
    for (const [i] of entries) if (i < 1 || i > max) throw invalid(`${name}.${i}`, `index must be 1-${max}`);
    return entries.sort((a, b) => a[0] - b[0]).map(([, v]) => v);
  }

  /** `Tag.N.Key` / `Tag.N.Value`, N from 1 to 20. */
  tags(): Array<{ key: string; value: string }> {
    const byIndex = new Map<number, { key?: string; value?: string }>();
    for (const [k, v] of Object.entries(this.raw)) {
      const m = /^Tag\.(\d+)\.(Key|Value)$/.exec(k);
      if (!m) continue;
      const i = Number(m[1]);
      if (i < 1 || i > 20) throw invalid(`Tag.${i}`, 'index must be 1-20');
      const e = byIndex.get(i) ?? {};
      if (m[2] === 'Key') e.key = v;
      else e.value = v;
      byIndex.set(i, e);
    }
    return [...byIndex.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([i, e]) => {
        if (!e.key) throw missing(`Tag.${i}.Key`);
        return { key: e.key, value: e.value ?? '' };
      });
  }

  /** A JSON array of strings, as DescribeInstances' `InstanceIds` takes it. */
  jsonList(name: string, max: number): string[] | undefined {
    const v = this.str(name);
    if (v === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch {
      throw invalid(name, 'must be a JSON array of strings');
    }
    if (!Array.isArray(parsed) || parsed.some((x) => typeof x !== 'string')) {
      throw invalid(name, 'must be a JSON array of strings');
    }
    if (parsed.length > max) throw invalid(name, `at most ${max} values are allowed`);
    return parsed as string[];
  }
}
