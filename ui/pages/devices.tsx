import { useState } from 'preact/hooks';
import { BarButton, DeleteButton, ListPage, SearchBox, usePagedList } from '../components/list.js';
import {
  CopyButton,
  Dialog,
  ErrorText,
  FormButtons,
  formatTs,
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
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<Device | 'new' | null>(null);
  const del = useAction();
  const customers = useCustomers(admin);
  const owner = (d: Device) =>
    !d.customerId || d.customerId.id === NULL_ID
      ? 'Tenant'
      : (customers.data?.find((c) => c.id.id === d.customerId?.id)?.title ?? '');
  const list = usePagedList<Device>(
    (page) =>
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
    [search],
  );
  return (
    <ListPage
      title="Devices"
      actions={
        <>
          <SearchBox
            value={search}
            onSearch={(v) => {
              setSearch(v);
              list.setPage(0);
            }}
          />
          {admin && <BarButton primary label="Add device" onClick={() => setEditing('new')} />}
        </>
      }
      error={del.error}
      label="Devices"
      list={list}
      rowKey={(d) => d.id.id}
      empty="No devices."
      columns={[
        { title: 'Name', cell: (d) => <Link href={`/devices/${d.id.id}`}>{d.name}</Link> },
        { title: 'Profile', cell: (d) => d.type },
        admin && { title: 'Owner', wide: true, cell: owner },
        { title: 'Label', wide: true, cell: (d) => d.label },
        { title: 'Created', wide: true, cell: (d) => formatTs(d.createdTime) },
        {
          title: 'Actions',
          class: 'actions',
          cell: (d) =>
            admin && (
              <>
                <CopyButton label="Copy token" text={() => accessToken(d.id.id)} />
                <button type="button" onClick={() => setEditing(d)}>
                  Edit
                </button>
                <DeleteButton
                  act={del}
                  what={`device ${d.name}`}
                  path={`/api/device/${d.id.id}`}
                  then={list.reload}
                />
              </>
            ),
        },
      ]}
    >
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
    </ListPage>
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
