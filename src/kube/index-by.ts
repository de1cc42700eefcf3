import { objectKey, type Watched } from './informer.js';

/**
 * A secondary index of an informer's cache (client-go's Indexer): objects by a value they carry
 * (pools by instance, pods by node), kept from the informer's change events, so that a reconcile
 * reads the few objects it needs instead of scanning the cache.
 */
export class IndexBy<T extends Watched> {
  private readonly byValue = new Map<string, Map<string, T>>();
  private readonly valueOf = new Map<string, string>();

  constructor(private readonly value: (o: T) => string | undefined) {}

  /** Feed it every change the informer reports. */
  onChange(type: 'add' | 'update' | 'delete', obj: T): void {
    const key = objectKey(obj);
    const old = this.valueOf.get(key);
    if (old !== undefined) {
      const set = this.byValue.get(old);
      set?.delete(key);
      if (set?.size === 0) this.byValue.delete(old);
      this.valueOf.delete(key);
    }
    const value = type === 'delete' ? undefined : this.value(obj);
    if (value === undefined || value === '') return;
    this.valueOf.set(key, value);
    (this.byValue.get(value) ?? this.byValue.set(value, new Map()).get(value)!).set(key, obj);
  }

  get(value: string): T[] {
    return [...(this.byValue.get(value)?.values() ?? [])];
  }
}
