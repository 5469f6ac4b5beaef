// A keyed table over @tanstack/table-core: the column model and sorting state come from table-core;
// rows are keyed by id so that a poll patches the cells that changed instead of rebuilding the table.
import { createTable, getCoreRowModel, getPaginationRowModel, getSortedRowModel } from "@tanstack/table-core";
import { useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { Pager } from "./widgets.js";

// columns: [{id, header, value(row) (for sorting), cell(row) (a vnode; default: value), sortable, className}]
// sorting: controlled ([{id, desc}]) with onSorting for server-side sorting; left out: sorted here.
// pageSize: paginated here (for tables the server answers whole).
export function DataTable({ columns, rows, rowKey, rowAttrs, testid, sorting, onSorting, empty = "Nothing here yet.", initialSort,
  pageSize }) {
  const [localSorting, setLocalSorting] = useState(initialSort || []);
  const [pageIndex, setPageIndex] = useState(0);
  const manual = sorting !== undefined;
  const sortState = manual ? sorting : localSorting;
  const tableRef = useRef(null);

  const defs = columns.map((c) => ({
    id: c.id,
    header: c.header,
    accessorFn: c.value || ((r) => r[c.id]),
    enableSorting: !!c.sortable,
    sortUndefined: "last",
    sortingFn: c.sortingFn || "basic",
    meta: c,
  }));
  const options = {
    data: rows || [],
    columns: defs,
    state: { sorting: sortState, pagination: { pageIndex, pageSize: pageSize || 1e9 } },
    onStateChange: () => {},
    onSortingChange: (updater) => {
      const next = typeof updater === "function" ? updater(sortState) : updater;
      if (manual) onSorting && onSorting(next);
      else setLocalSorting(next);
    },
    getRowId: (r) => String(rowKey(r)),
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: manual ? undefined : getSortedRowModel(),
    getPaginationRowModel: pageSize ? getPaginationRowModel() : undefined,
    onPaginationChange: () => {},
    autoResetPageIndex: false,
    manualSorting: manual,
    enableSortingRemoval: false,
    sortDescFirst: false,
    renderFallbackValue: null,
  };
  if (!tableRef.current) tableRef.current = createTable(options);
  const table = tableRef.current;
  // as table-core's own adapters do: the full initial state with ours over it
  table.setOptions((prev) => ({ ...prev, ...options, state: { ...table.initialState, ...options.state } }));

  const headers = table.getHeaderGroups()[0].headers;
  const model = table.getRowModel().rows;
  const total = (rows || []).length;
  const pager = pageSize && total > pageSize
    ? html`<${Pager} testid=${testid + "-pager"} page=${pageIndex + 1} pageSize=${pageSize} total=${total}
        onPage=${(p) => setPageIndex(p - 1)} />`
    : null;
  return html`
    <table class="table" data-testid=${testid}>
      <thead>
        <tr>
          ${headers.map((hd) => {
            const c = hd.column.columnDef.meta;
            const dir = hd.column.getIsSorted();
            const sortable = hd.column.getCanSort();
            return html`<th key=${hd.id} class=${[c.className, sortable ? "sortable" : "", dir ? "sorted" : ""].join(" ")}
              data-col=${c.id} onClick=${sortable ? hd.column.getToggleSortingHandler() : undefined}
              aria-sort=${dir === "asc" ? "ascending" : dir === "desc" ? "descending" : undefined}>
              ${c.header}${dir ? html`<span class="sort-arrow">${dir === "asc" ? " ▲" : " ▼"}</span>` : null}
            </th>`;
          })}
        </tr>
      </thead>
      <tbody>
        ${model.length === 0
          ? html`<tr class="empty"><td colspan=${headers.length}>${empty}</td></tr>`
          : model.map((row) => html`
            <tr key=${row.id} ...${rowAttrs ? rowAttrs(row.original) : {}}>
              ${row.getVisibleCells().map((cell) => {
                const c = cell.column.columnDef.meta;
                const content = c.cell ? c.cell(row.original) : cell.getValue();
                return html`<td key=${c.id} data-col=${c.id} class=${c.className || ""}>${content ?? "—"}</td>`;
              })}
            </tr>`)}
      </tbody>
    </table>${pager}`;
}
