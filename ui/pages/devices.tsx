import { useState } from 'preact/hooks';
import {
  CopyButton,
  Dialog,
  ErrorText,
  FormButtons,
  formatTs,
  Paging,
  useAction,
  useLoad,
} from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';
import { isTenantAdmin, useApp } from '../lib/app-context.js';
import { Link, navigate } from '../lib/router.js';

/** Devices: search, paging, create, edit, delete, copy the access token. */

export interface Device {
  id: Id;
  name: string;
  type: string;
  label: string | null;
  createdTime: number;
  customerId?: Id;
  deviceProfileId?: Id;
  additionalInfo?: Record<string, unknown> | null;
}

interface ProfileInfo {
  id: Id;
  name: string;
  default?: boolean;
}

const NULL_ID = '13814000-1dd2-11b2-8080-808080808080';

interface CustomerRow {
  id: Id;
  title: string;
}

/** The tenant's customers (for owner names and owner changes); empty for customer users. */
function useCustomers(enabled: boolean) {
  return useLoad(
    () =>
      enabled
        ? api<PageData<CustomerRow>>(`/api/customers${qs({ pageSize: 1000, page: 0 })}`).then(
            (p) => p.data,
          )
        : Promise.resolve([] as CustomerRow[]),
    [enabled],
  );
}

export function devicesPath(customerId: string | undefined, query: string): string {
  return customerId && customerId !== NULL_ID
    ? `/api/customer/${customerId}/devices${query}`
    : `/api/tenant/devices${query}`;
}

export function accessToken(deviceId: string): Promise<string> {
  return api<{ credentialsId: string }>(`/api/device/${deviceId}/credentials`).then(
    (c) => c.credentialsId,
  );
}

export function DevicesPage() {
  const { user } = useApp();
  const admin = isTenantAdmin(user);
  const [page, setPage] = useState(0);
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<Device | 'new' | null>(null);
  const del = useAction();
  const customers = useCustomers(admin);
  const owner = (d: Device) =>
    !d.customerId || d.customerId.id === NULL_ID
      ? 'Tenant'
      : (customers.data?.find((c) => c.id.id === d.customerId?.id)?.title ?? '');
  const list = useLoad(
    () =>
      api<PageData<Device>>(
        devicesPath(
          admin ? undefined : user.customerId?.id,
          qs({
            pageSize: 20,
            page,
            textSearch: search || undefined,
            sortProperty: 'name',
            sortOrder: 'ASC',
          }),
        ),
      ),
    [page, search],
  );
  const remove = async (d: Device) => {
    if (!confirm(`Delete device ${d.name}?`)) return;
    if (await del.run(() => api(`/api/device/${d.id.id}`, { method: 'DELETE' }))) list.reload();
  };
  return (
    <section>
      <div class="bar">
        <h1>Devices</h1>
        <label class="search">
          Search
          <input
            type="search"
            value={search}
            onInput={(e) => {
              setSearch(e.currentTarget.value);
              setPage(0);
            }}
          />
        </label>
        {admin && (
          <button type="button" class="primary" onClick={() => setEditing('new')}>
            Add device
          </button>
        )}
      </div>
      <ErrorText error={list.error || del.error} />
      <div class="scroll">
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Profile</th>
              {admin && <th class="wide">Owner</th>}
              <th class="wide">Label</th>
              <th class="wide">Created</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.data.map((d) => (
              <tr key={d.id.id}>
                <td>
                  <Link href={`/devices/${d.id.id}`}>{d.name}</Link>
                </td>
                <td>{d.type}</td>
                {admin && <td class="wide">{owner(d)}</td>}
                <td class="wide">{d.label}</td>
                <td class="wide">{formatTs(d.createdTime)}</td>
                <td class="actions">
                  {admin && (
                    <>
                      <CopyButton label="Copy token" text={() => accessToken(d.id.id)} />
                      <button type="button" onClick={() => setEditing(d)}>
                        Edit
                      </button>
                      <button type="button" onClick={() => void remove(d)}>
                        Delete
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {list.data && list.data.data.length === 0 && <p>No devices.</p>}
      <Paging page={page} hasNext={list.data?.hasNext ?? false} onPage={setPage} />
      {editing && (
        <DeviceDialog
          device={editing === 'new' ? undefined : editing}
          onClose={() => setEditing(null)}
          onSaved={(d, created) => {
            setEditing(null);
            if (created) navigate(`/devices/${d.id.id}`);
            else list.reload();
          }}
        />
      )}
    </section>
  );
}

/** Create or edit a device: name, label, profile, gateway flag, credentials. */
export function DeviceDialog(props: {
  device?: Device;
  onClose: () => void;
  onSaved: (d: Device, created: boolean) => void;
}) {
  const d = props.device;
  const profiles = useLoad(
    () => api<PageData<ProfileInfo>>(`/api/deviceProfileInfos${qs({ pageSize: 100, page: 0 })}`),
    [],
  );
  const save = useAction();
  const customers = useCustomers(true);
  const ownerBefore = d?.customerId && d.customerId.id !== NULL_ID ? d.customerId.id : '';
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const profileId = String(f.get('profile') ?? '');
    const body = {
      ...d,
      name: String(f.get('name')),
      label: String(f.get('label') ?? '') || null,
      deviceProfileId: profileId ? { entityType: 'DEVICE_PROFILE', id: profileId } : undefined,
      type: undefined,
      additionalInfo: { ...(d?.additionalInfo ?? {}), gateway: f.get('gateway') === 'on' },
    };
    const token = String(f.get('token') ?? '');
    const ownerAfter = String(f.get('owner') ?? '');
    await save.run(async () => {
      let saved = await api<Device>(
        `/api/device${d ? '' : qs({ accessToken: token || undefined })}`,
        { body },
      );
      // Owner changes go through ThingsBoard's assign/unassign calls.
      if (ownerAfter !== ownerBefore) {
        saved = await api<Device>(
          ownerAfter
            ? `/api/customer/${ownerAfter}/device/${saved.id.id}`
            : `/api/customer/device/${saved.id.id}`,
          { method: ownerAfter ? 'POST' : 'DELETE' },
        );
      }
      props.onSaved(saved, !d);
    });
  };
  return (
    <Dialog title={d ? `Edit ${d.name}` : 'Add device'} onClose={props.onClose}>
      <form class="stack" onSubmit={submit}>
        <label>
          Name
          <input name="name" required defaultValue={d?.name ?? ''} />
        </label>
        <label>
          Label
          <input name="label" defaultValue={d?.label ?? ''} />
        </label>
        <label>
          Device profile
          <select name="profile">
            {profiles.data?.data.map((p) => (
              <option
                key={p.id.id}
                value={p.id.id}
                selected={d ? d.deviceProfileId?.id === p.id.id : p.default}
              >
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Owner
          <select name="owner">
            <option value="">Tenant</option>
            {customers.data?.map((c) => (
              <option key={c.id.id} value={c.id.id} selected={c.id.id === ownerBefore}>
                {c.title}
              </option>
            ))}
          </select>
        </label>
        {!d && (
          <label>
            Access token (empty: generated)
            <input name="token" autocomplete="off" />
          </label>
        )}
        <label class="check">
          <input
            type="checkbox"
            name="gateway"
            defaultChecked={d?.additionalInfo?.gateway === true}
          />
          Is a gateway
        </label>
        <ErrorText error={save.error || profiles.error} />
        <FormButtons onCancel={props.onClose} busy={save.busy} label="Save" />
      </form>
    </Dialog>
  );
}
