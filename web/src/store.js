// Tiny global state: "master unreachable", toasts, the confirmation dialog. Components subscribe
// with useStore(); setters notify only when a value changes.
import { useEffect, useState } from "preact/hooks";

export function createStore(initial) {
  let value = initial;
  const subs = new Set();
  return {
    get: () => value,
    set(next) {
      if (next === value) return;
      value = next;
      subs.forEach((fn) => fn(value));
    },
    subscribe(fn) {
      subs.add(fn);
      return () => subs.delete(fn);
    },
  };
}

export function useStore(store) {
  const [value, setValue] = useState(store.get());
  useEffect(() => {
    setValue(store.get());
    return store.subscribe(setValue);
  }, [store]);
  return value;
}

export const masterDown = createStore(false);
export const toasts = createStore([]);
export const confirmation = createStore(null);

let toastSeq = 0;
export function toastError(message) {
  const id = ++toastSeq;
  toasts.set([...toasts.get(), { id, kind: "error", message }]);
  setTimeout(() => dismissToast(id), 8000);
}

export function toastInfo(message) {
  const id = ++toastSeq;
  toasts.set([...toasts.get(), { id, kind: "info", message }]);
  setTimeout(() => dismissToast(id), 3000);
}

export function dismissToast(id) {
  toasts.set(toasts.get().filter((t) => t.id !== id));
}

// Ask before doing something: resolves true (yes) or false (no / escape).
export function confirm(title, body, yesLabel = "Confirm") {
  return new Promise((resolve) => {
    confirmation.set({ title, body, yesLabel, resolve });
  });
}
