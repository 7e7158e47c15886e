import { useState } from 'preact/hooks';
import {
  BarButton,
  DeleteButton,
  Field,
  FormDialog,
  ListPage,
  PagedTable,
  usePagedList,
} from '../components/list.js';
import { CopyButton, ErrorText, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs, type User } from '../lib/api.js';
import { Link } from '../lib/router.js';
import type { Device } from './devices.js';

/**
 * Customers and their users: create, the activation link to copy (the gateway may have no mail),
 * disable, delete; the customer's devices and dashboards (assign from the tenant, unassign).
 */

interface Customer {
  id: Id;
  title: string;
  email?: string | null;
  phone?: string | null;
  createdTime: number;
}

interface UserRow extends User {
  additionalInfo?: { userCredentialsEnabled?: boolean } | null;
}

interface DashboardInfo {
  id: Id;
  title: string;
}

const page20 = (page: number) =>
  qs({ pageSize: 20, page, sortProperty: 'title', sortOrder: 'ASC' });

export function CustomersPage() {
  const [creating, setCreating] = useState(false);
  const list = usePagedList<Customer>((page) => `/api/customers${page20(page)}`);
  return (
    <ListPage
      title="Customers"
      actions={<BarButton primary label="Add customer" onClick={() => setCreating(true)} />}
      label="Customers"
      list={list}
      rowKey={(c) => c.id.id}
      columns={[
        { title: 'Title', cell: (c) => <Link href={`/customers/${c.id.id}`}>{c.title}</Link> },
        { title: 'Email', wide: true, cell: (c) => c.email },
      ]}
    >
      {creating && (
        <FormDialog
          title="Add customer"
          label="Create"
          onClose={() => setCreating(false)}
          onSubmit={async (f) => {
            await api('/api/customer', {
              body: { title: String(f.get('title')), email: String(f.get('email') ?? '') || null },
            });
            setCreating(false);
            list.reload();
          }}
        >
          <Field label="Title" name="title" required />
          <Field label="Email" name="email" type="email" />
        </FormDialog>
      )}
    </ListPage>
  );
}

export function CustomerPage(props: { params: Record<string, string> }) {
  const id = props.params.id;
  const customer = useLoad(() => api<Customer>(`/api/customer/${id}`), [id]);
  return (
    <section class="stack">
      <p class="crumbs">
        <Link href="/customers">Customers</Link> /
      </p>
      <h1>{customer.data?.title ?? 'Customer'}</h1>
      <ErrorText error={customer.error} />
      <CustomerUsers customerId={id} />
      <CustomerDevices customerId={id} />
      <CustomerDashboards customerId={id} />
    </section>
  );
}

function CustomerUsers(props: { customerId: string }) {
  const [link, setLink] = useState<{ email: string; url: string } | null>(null);
  const users = usePagedList<UserRow>(
    (page) =>
      `/api/customer/${props.customerId}/users${qs({ pageSize: 20, page, sortProperty: 'email', sortOrder: 'ASC' })}`,
    [props.customerId],
  );
  const act = useAction();
  const add = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const f = new FormData(form);
    void act.run(async () => {
      const u = await api<UserRow>(`/api/user${qs({ sendActivationMail: false })}`, {
        body: {
          email: String(f.get('email')),
          firstName: String(f.get('firstName') ?? '') || null,
          authority: 'CUSTOMER_USER',
          customerId: { entityType: 'CUSTOMER', id: props.customerId },
        },
      });
      const url = await api<string>(`/api/user/${u.id.id}/activationLink`);
      setLink({ email: u.email, url });
      form.reset();
      users.reload();
    });
  };
  const enabled = (u: UserRow) => u.additionalInfo?.userCredentialsEnabled !== false;
  const enable = (u: UserRow, on: boolean) =>
    void act
      .run(() =>
        api(`/api/user/${u.id.id}/userCredentialsEnabled${qs({ userCredentialsEnabled: on })}`, {
          method: 'POST',
        }),
      )
      .then(users.reload);
  return (
    <section aria-labelledby="h-users" class="stack">
      <h2 id="h-users">Users</h2>
      <PagedTable
        label="Customer users"
        list={users}
        rowKey={(u) => u.id.id}
        columns={[
          { title: 'Email', cell: (u) => u.email },
          { title: 'State', cell: (u) => (enabled(u) ? 'Enabled' : 'Disabled') },
          {
            title: 'Actions',
            class: 'actions',
            cell: (u) => (
              <>
                <CopyButton
                  label="Copy activation link"
                  text={() => api<string>(`/api/user/${u.id.id}/activationLink`)}
                />
                <button type="button" onClick={() => enable(u, !enabled(u))}>
                  {enabled(u) ? 'Disable' : 'Enable'}
                </button>
                <DeleteButton
                  act={act}
                  what={`user ${u.email}`}
                  path={`/api/user/${u.id.id}`}
                  then={users.reload}
                />
              </>
            ),
          },
        ]}
      />
      <form class="row" onSubmit={add} aria-label="Add customer user">
        <label>
          User email
          <input name="email" type="email" required />
        </label>
        <label>
          First name
          <input name="firstName" />
        </label>
        <button type="submit" class="primary" disabled={act.busy}>
          Add user
        </button>
      </form>
      <ErrorText error={act.error || users.error} />
      {link && (
        <div class="card" role="status">
          <p>Activation link for {link.email} (hand it over; it works once):</p>
          <p>
            <a href={link.url} class="activation-link">
              {link.url}
            </a>
          </p>
          <CopyButton label="Copy link" text={() => link.url} />
        </div>
      )}
    </section>
  );
}

function CustomerDevices(props: { customerId: string }) {
  const mine = usePagedList<Device>(
    (page) =>
      `/api/customer/${props.customerId}/devices${qs({ pageSize: 20, page, sortProperty: 'name', sortOrder: 'ASC' })}`,
    [props.customerId],
  );
  const all = useLoad(
    () =>
      api<PageData<Device>>(
        `/api/tenant/devices${qs({ pageSize: 200, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
      ),
    [props.customerId],
  );
  const act = useAction();
  const assign = (e: Event) => {
    e.preventDefault();
    const deviceId = String(new FormData(e.currentTarget as HTMLFormElement).get('device'));
    if (!deviceId) return;
    void act
      .run(() => api(`/api/customer/${props.customerId}/device/${deviceId}`, { method: 'POST' }))
      .then(() => {
        mine.reload();
        all.reload();
      });
  };
  const unassign = (d: Device) =>
    void act
      .run(() => api(`/api/customer/device/${d.id.id}`, { method: 'DELETE' }))
      .then(() => {
        mine.reload();
        all.reload();
      });
  const free = (all.data?.data ?? []).filter((d) => d.customerId?.id !== props.customerId);
  return (
    <section aria-labelledby="h-cdevices" class="stack">
      <h2 id="h-cdevices">Devices</h2>
      <PagedTable
        label="Customer devices"
        list={mine}
        rowKey={(d) => d.id.id}
        columns={[
          { title: 'Name', cell: (d) => <Link href={`/devices/${d.id.id}`}>{d.name}</Link> },
          { title: 'Profile', cell: (d) => d.type },
          {
            title: 'Actions',
            cell: (d) => (
              <button type="button" onClick={() => unassign(d)}>
                Unassign
              </button>
            ),
          },
        ]}
      />
      <form class="row" onSubmit={assign} aria-label="Assign device">
        <label>
          Device
          <select name="device">
            {free.map((d) => (
              <option key={d.id.id} value={d.id.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={act.busy || free.length === 0}>
          Assign device
        </button>
      </form>
      <ErrorText error={act.error || mine.error} />
    </section>
  );
}

function CustomerDashboards(props: { customerId: string }) {
  const mine = useLoad(
    () =>
      api<PageData<DashboardInfo>>(
        `/api/customer/${props.customerId}/dashboards${page20(0).replace('pageSize=20', 'pageSize=100')}`,
      ),
    [props.customerId],
  );
  const all = useLoad(
    () => api<PageData<DashboardInfo>>(`/api/tenant/dashboards${qs({ pageSize: 200, page: 0 })}`),
    [],
  );
  const act = useAction();
  const path = (d: string) => `/api/customer/${props.customerId}/dashboard/${d}`;
  const assign = (e: Event) => {
    e.preventDefault();
    const d = String(new FormData(e.currentTarget as HTMLFormElement).get('dashboard'));
    if (d) void act.run(() => api(path(d), { method: 'POST' })).then(mine.reload);
  };
  const shared = new Set(mine.data?.data.map((d) => d.id.id));
  const free = (all.data?.data ?? []).filter((d) => !shared.has(d.id.id));
  return (
    <section aria-labelledby="h-cdash" class="stack">
      <h2 id="h-cdash">Dashboards</h2>
      <ul>
        {mine.data?.data.map((d) => (
          <li key={d.id.id}>
            <Link href={`/dashboards/${d.id.id}`}>{d.title}</Link>{' '}
            <button
              type="button"
              onClick={() =>
                void act.run(() => api(path(d.id.id), { method: 'DELETE' })).then(mine.reload)
              }
            >
              Unassign
            </button>
          </li>
        ))}
      </ul>
      <form class="row" onSubmit={assign} aria-label="Assign dashboard">
        <label>
          Dashboard
          <select name="dashboard">
            {free.map((d) => (
              <option key={d.id.id} value={d.id.id}>
                {d.title}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={act.busy || free.length === 0}>
          Assign dashboard
        </button>
      </form>
      <ErrorText error={act.error || mine.error} />
    </section>
  );
}
