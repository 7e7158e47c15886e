import type { ComponentChildren, JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, type PageData } from '../lib/api.js';
import { Dialog, ErrorText, FormButtons, Paging, useAction, useLoad } from './ui.js';

/**
 * The list pages' one shape: a title bar with actions, an error line, a table of rows with one
 * column definition each, paging, a delete button that asks first, and a dialog form. Pages give
 * columns and paths; this file gives the markup.
 */

/** One column: its header and what a row shows in it (`wide` columns hide on narrow screens). */
export interface Column<T> {
  title: string;
  cell: (row: T) => ComponentChildren;
  wide?: boolean;
  class?: string;
}

/** A paged list from the API: `path(page)` is read again when the page or `deps` change. */
export function usePagedList<T>(path: (page: number) => string, deps: unknown[] = []) {
  const [page, setPage] = useState(0);
  const list = useLoad(() => api<PageData<T>>(path(page)), [page, ...deps]);
  return { ...list, page, setPage };
}
export type PagedList<T> = ReturnType<typeof usePagedList<T>>;

/** A table with a header row from `columns` (false entries are left out) and one row per item. */
export function EntityTable<T>(props: {
  label: string;
  columns: Array<Column<T> | false>;
  rows: T[] | undefined;
  rowKey: (row: T) => string;
  /** Shown under the table when `rows` is loaded and empty. */
  empty?: string;
  rowProps?: (row: T) => JSX.HTMLAttributes<HTMLTableRowElement> & Record<`data-${string}`, string>;
}) {
  const columns = props.columns.filter((c): c is Column<T> => c !== false);
  const cls = (c: Column<T>) => [c.wide && 'wide', c.class].filter(Boolean).join(' ') || undefined;
  return (
    <>
      <div class="scroll">
        <table aria-label={props.label}>
          <thead>
            <tr>
              {columns.map((c) => (
                <th key={c.title} class={c.wide ? 'wide' : undefined}>
                  {c.title}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.rows?.map((r) => (
              <tr key={props.rowKey(r)} {...props.rowProps?.(r)}>
                {columns.map((c) => (
                  <td key={c.title} class={cls(c)}>
                    {c.cell(r)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {props.empty && props.rows?.length === 0 && <p>{props.empty}</p>}
    </>
  );
}

/** A paged entity table with its paging row. */
export function PagedTable<T>(
  props: { list: PagedList<T> } & Omit<Parameters<typeof EntityTable<T>>[0], 'rows'>,
) {
  const { list, ...table } = props;
  return (
    <>
      <EntityTable {...table} rows={list.data?.data} />
      <Paging page={list.page} hasNext={list.data?.hasNext ?? false} onPage={list.setPage} />
    </>
  );
}

/**
 * A list page: title bar (`actions` beside the heading), the list's or `error`'s message, the
 * paged table, then `children` (the page's dialogs).
 */
export function ListPage<T>(
  props: {
    title: string;
    actions?: ComponentChildren;
    error?: string;
    children?: ComponentChildren;
  } & Parameters<typeof PagedTable<T>>[0],
) {
  const { title, actions, error, children, ...table } = props;
  return (
    <section class="stack">
      <div class="bar">
        <h1>{title}</h1>
        {actions}
      </div>
      <ErrorText error={props.list.error || error} />
      <PagedTable {...table} />
      {children}
    </section>
  );
}

/** A bar button that opens something (`primary` for the page's main action). */
export function BarButton(props: { label: string; onClick: () => void; primary?: boolean }) {
  return (
    <button type="button" class={props.primary ? 'primary' : undefined} onClick={props.onClick}>
      {props.label}
    </button>
  );
}

/**
 * A button that runs `action` after the browser's confirm (`question`); `then` runs after a
 * success (usually the list's reload). Errors go to `act.error`.
 */
export function ConfirmButton(props: {
  act: ReturnType<typeof useAction>;
  question: string;
  action: () => Promise<unknown>;
  then?: () => void;
  label?: string;
}) {
  const click = () => {
    if (!confirm(props.question)) return;
    void props.act.run(props.action).then((ok) => ok && props.then?.());
  };
  return (
    <button type="button" onClick={click}>
      {props.label ?? 'Delete'}
    </button>
  );
}

/** `ConfirmButton` for `DELETE path`: "Delete {what}?". */
export function DeleteButton(props: {
  act: ReturnType<typeof useAction>;
  what: string;
  path: string;
  then?: () => void;
}) {
  return (
    <ConfirmButton
      act={props.act}
      question={`Delete ${props.what}?`}
      action={() => api(props.path, { method: 'DELETE' })}
      then={props.then}
    />
  );
}

/**
 * A dialog with one form: `fields` inside, the error, cancel and submit. `onSubmit` gets the
 * form's data; its error is shown, and on success the caller decides (close, navigate, reload).
 */
export function FormDialog(props: {
  title: string;
  label: string;
  onClose: () => void;
  onSubmit: (form: FormData) => Promise<unknown>;
  children: ComponentChildren;
}) {
  const act = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    void act.run(() => props.onSubmit(form));
  };
  return (
    <Dialog title={props.title} onClose={props.onClose}>
      <form class="stack" onSubmit={submit}>
        {props.children}
        <ErrorText error={act.error} />
        <FormButtons onCancel={props.onClose} busy={act.busy} label={props.label} />
      </form>
    </Dialog>
  );
}

/** A labelled text input (`name` for FormData; `value` pre-filled). */
export function Field(
  props: { label: string; name: string } & JSX.InputHTMLAttributes<HTMLInputElement>,
) {
  const { label, ...input } = props;
  return (
    <label>
      {label}
      <input {...input} />
    </label>
  );
}

/** The list's search box: a new text goes back to the first page. */
export function SearchBox(props: { value: string; onSearch: (v: string) => void }) {
  return (
    <label class="search">
      Search
      <input
        type="search"
        value={props.value}
        onInput={(e) => props.onSearch(e.currentTarget.value)}
      />
    </label>
  );
}

/**
 * A labelled select of `[value, text]` options: controlled with `value` and `onChange`, or a form
 * field (`name`) starting at `initial`.
 */
export function Select(props: {
  label: string;
  name?: string;
  options: ReadonlyArray<readonly [string, string]>;
  value?: string;
  onChange?: (v: string) => void;
  initial?: string | null;
  required?: boolean;
}) {
  const onChange = props.onChange;
  return (
    <label>
      {props.label}
      <select
        name={props.name}
        required={props.required}
        value={props.value}
        onChange={onChange && ((e) => onChange(e.currentTarget.value))}
      >
        {props.options.map(([v, text]) => (
          <option key={v} value={v} selected={props.value === undefined && v === props.initial}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
}
