/**
 * The timers of one transaction, cleared together when it ends. Unreferenced: a transaction
 * waiting out Timer J must not keep a process alive that is otherwise done.
 */
export class TransactionTimer {
  private readonly handles = new Set<NodeJS.Timeout>();

  after(ms: number, run: () => void): void {
    const handle = setTimeout(() => {
      this.handles.delete(handle);
      run();
    }, ms);
    handle.unref();
    this.handles.add(handle);
  }

  clear(): void {
    for (const handle of this.handles) clearTimeout(handle);
    this.handles.clear();
  }
}
