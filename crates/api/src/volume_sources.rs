//! Which source(s) a pod volume sets, in the order Kubernetes' validation
//! checks them (`validateVolumeSource`).

use k8s_openapi::api::core::v1::Volume;

/// A volume source: its JSON field name and the name validation uses for it
/// in "may not specify more than 1 volume type" errors (which differs for
/// `cephfs` → `cephFS` and `downwardAPI` → `downwarAPI`, upstream quirks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeSourceKind {
    pub field: &'static str,
    pub validation_field: &'static str,
}

const fn kind(field: &'static str, validation_field: &'static str) -> VolumeSourceKind {
    VolumeSourceKind { field, validation_field }
}

/// The sources set on `v`, in validation order.
pub fn volume_sources(v: &Volume) -> Vec<VolumeSourceKind> {
    let set = [
        (v.empty_dir.is_some(), kind("emptyDir", "emptyDir")),
        (v.host_path.is_some(), kind("hostPath", "hostPath")),
        (v.git_repo.is_some(), kind("gitRepo", "gitRepo")),
        (v.gce_persistent_disk.is_some(), kind("gcePersistentDisk", "gcePersistentDisk")),
        (v.aws_elastic_block_store.is_some(), kind("awsElasticBlockStore", "awsElasticBlockStore")),
        (v.secret.is_some(), kind("secret", "secret")),
        (v.nfs.is_some(), kind("nfs", "nfs")),
        (v.iscsi.is_some(), kind("iscsi", "iscsi")),
        (v.glusterfs.is_some(), kind("glusterfs", "glusterfs")),
        (v.flocker.is_some(), kind("flocker", "flocker")),
        (v.persistent_volume_claim.is_some(), kind("persistentVolumeClaim", "persistentVolumeClaim")),
        (v.rbd.is_some(), kind("rbd", "rbd")),
        (v.cinder.is_some(), kind("cinder", "cinder")),
        (v.cephfs.is_some(), kind("cephfs", "cephFS")),
        (v.quobyte.is_some(), kind("quobyte", "quobyte")),
        (v.downward_api.is_some(), kind("downwardAPI", "downwarAPI")),
        (v.fc.is_some(), kind("fc", "fc")),
        (v.flex_volume.is_some(), kind("flexVolume", "flexVolume")),
        (v.config_map.is_some(), kind("configMap", "configMap")),
        (v.azure_file.is_some(), kind("azureFile", "azureFile")),
        (v.vsphere_volume.is_some(), kind("vsphereVolume", "vsphereVolume")),
        (v.photon_persistent_disk.is_some(), kind("photonPersistentDisk", "photonPersistentDisk")),
        (v.portworx_volume.is_some(), kind("portworxVolume", "portworxVolume")),
        (v.azure_disk.is_some(), kind("azureDisk", "azureDisk")),
        (v.storageos.is_some(), kind("storageos", "storageos")),
        (v.projected.is_some(), kind("projected", "projected")),
        (v.scale_io.is_some(), kind("scaleIO", "scaleIO")),
        (v.csi.is_some(), kind("csi", "csi")),
        (v.ephemeral.is_some(), kind("ephemeral", "ephemeral")),
        (v.image.is_some(), kind("image", "image")),
    ];
    set.into_iter().filter(|(on, _)| *on).map(|(_, k)| k).collect()
}

/// True if the volume sets no source at all (defaulting then makes it an
/// `emptyDir`).
pub fn has_no_source(v: &Volume) -> bool {
    volume_sources(v).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, DownwardAPIVolumeSource, EmptyDirVolumeSource};

    #[test]
    fn lists_sources_in_validation_order() {
        let v = Volume {
            name: "v".into(),
            config_map: Some(ConfigMapVolumeSource::default()),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            downward_api: Some(DownwardAPIVolumeSource::default()),
            ..Default::default()
        };
        let names: Vec<_> = volume_sources(&v).iter().map(|k| k.field).collect();
        assert_eq!(names, ["emptyDir", "downwardAPI", "configMap"]);
        assert_eq!(volume_sources(&v)[1].validation_field, "downwarAPI");
        assert!(has_no_source(&Volume::default()));
        assert!(!has_no_source(&v));
    }
}
